(class_declaration name: (_) @name) @definition.class
(function_declaration name: (_) @name) @definition.function
(generator_function_declaration name: (_) @name) @definition.function
(method_definition name: (_) @name) @definition.method
(lexical_declaration . (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)]) .) @definition.function
(variable_declaration . (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)]) .) @definition.function
(lexical_declaration . (variable_declarator name: (identifier) @name value: (class)) .) @definition.class
(expression_statement (assignment_expression left: (member_expression) @name right: [(arrow_function) (function_expression)])) @definition.function
(field_definition property: (_) @name value: [(arrow_function) (function_expression)]) @definition.method
(pair key: (_) @name value: [(arrow_function) (function_expression)]) @definition.function
(export_statement declaration: (_) @inner) @wrapper
(import_statement) @import
