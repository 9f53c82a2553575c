; Definitions: @definition.<kind> on the node that is the span, @name on its name.
(class_definition name: (identifier) @name) @definition.class
(function_definition name: (identifier) @name) @definition.function
; Wrappers: the decorated definition is the span; its inner definition gives kind and name.
(decorated_definition definition: (_) @inner) @wrapper
; Import statements (kept in their own module-level spans).
(import_statement) @import
(import_from_statement) @import
(future_import_statement) @import
