; A section (heading plus everything up to the next heading of the same or higher level) is a definition.
(section (atx_heading (inline) @name)) @definition.section
; Anchored: tree-sitter-markdown opens no section at a setext heading, so one can sit inside an ATX section
; (after a list, say); only a section that starts with it is named after it.
(section . (setext_heading (paragraph) @name)) @definition.section
