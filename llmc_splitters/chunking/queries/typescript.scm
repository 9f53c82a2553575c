(class_declaration name: (_) @name) @definition.class
(abstract_class_declaration name: (_) @name) @definition.class
(interface_declaration name: (_) @name) @definition.interface
(enum_declaration name: (_) @name) @definition.enum
(type_alias_declaration name: (_) @name) @definition.type
(internal_module name: (_) @name) @definition.module
(module name: (_) @name) @definition.module
(function_declaration name: (_) @name) @definition.function
(generator_function_declaration name: (_) @name) @definition.function
(function_signature name: (_) @name) @definition.function
(method_definition name: (_) @name) @definition.method
(method_signature name: (_) @name) @definition.method
(abstract_method_signature name: (_) @name) @definition.method
(lexical_declaration . (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)]) .) @definition.function
(variable_declaration . (variable_declarator name: (identifier) @name value: [(arrow_function) (function_expression) (generator_function)]) .) @definition.function
(lexical_declaration . (variable_declarator name: (identifier) @name value: (class)) .) @definition.class
(expression_statement (assignment_expression left: (member_expression) @name right: [(arrow_function) (function_expression)])) @definition.function
(public_field_definition name: (_) @name value: [(arrow_function) (function_expression)]) @definition.method
(pair key: (_) @name value: [(arrow_function) (function_expression)]) @definition.function
(export_statement declaration: (_) @inner) @wrapper
(expression_statement (internal_module) @inner) @wrapper
(import_statement) @import
