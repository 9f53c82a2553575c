; A section (heading plus everything up to the next heading of the same or higher level) is a definition.
(section (atx_heading (inline) @name)) @definition.section
(section (setext_heading (paragraph) @name)) @definition.section
