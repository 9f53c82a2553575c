"""A small multi-language project whose code raises, throws, prints or logs messages from string templates, for the
tests of message matching (issue 37, item 8): each template kind is made by one function among others that use the
same words (``invalid``, ``fields``, ``request``, ``config``, ``key``, ``manifest``) in code, comments and plain
strings.

``MESSAGES`` maps a kind to the message a user pastes, the file that makes it and the line of code that does.
"""

from __future__ import annotations

from pathlib import Path

SCHEMA_PY = '''\
"""Schemas: declare fields once, then load (validate and deserialize) and dump (serialize) objects."""

from __future__ import annotations

import typing

from . import fields as ma_fields
from .exceptions import ValidationError


class SchemaOpts:
    """Options of a schema, read from its inner ``Meta`` class: ``fields``, ``additional``, ``exclude``,
    ``load_only``, ``dump_only``, ``unknown``."""

    def __init__(self, meta: typing.Any, ordered: bool = False) -> None:
        self.fields = getattr(meta, "fields", ())
        if not isinstance(self.fields, (list, tuple)):
            raise ValueError("`fields` option must be a list or tuple.")
        self.additional = getattr(meta, "additional", ())
        if not isinstance(self.additional, (list, tuple)):
            raise ValueError("`additional` option must be a list or tuple.")
        if self.fields and self.additional:
            raise ValueError("Cannot set both `fields` and `additional` options for the same Schema.")
        self.exclude = getattr(meta, "exclude", ())
        self.load_only = getattr(meta, "load_only", ())
        self.dump_only = getattr(meta, "dump_only", ())
        self.unknown = getattr(meta, "unknown", "raise")
        self.ordered = ordered


class Schema:
    """Base schema: subclass it and declare fields as class attributes.

    Example::

        class UserSchema(Schema):
            name = fields.Str()
            email = fields.Email()

        UserSchema(many=False).load({"name": "Ann", "email": "ann@example.com"})
    """

    OPTIONS_CLASS = SchemaOpts
    set_class = set
    dict_class = dict

    class Meta:
        pass

    def __init__(self, *, only=None, exclude=(), many: bool = False, partial=None, unknown=None) -> None:
        self.declared_fields = {k: v for k, v in type(self).__dict__.items() if isinstance(v, ma_fields.Field)}
        self.opts = self.OPTIONS_CLASS(self.Meta)
        self.only = only
        self.exclude = set(self.opts.exclude) | set(exclude)
        self.many = many
        self.partial = partial
        self.unknown = unknown or self.opts.unknown
        self.fields: dict[str, ma_fields.Field] = {}
        self.load_fields: dict[str, ma_fields.Field] = {}
        self.dump_fields: dict[str, ma_fields.Field] = {}
        self._init_fields()

    def __repr__(self) -> str:
        return f"<{self.__class__.__name__}(many={self.many})>"

    def _init_fields(self) -> None:
        """Update self.fields, self.load_fields and self.dump_fields from the schema's options."""
        if self.opts.fields:
            available = self.set_class(self.opts.fields)
        else:
            available = self.set_class(self.declared_fields.keys())
            if self.opts.additional:
                available |= self.set_class(self.opts.additional)
        invalid_fields = self.set_class()
        if self.only is not None:
            field_names = self.set_class(self.only)
            invalid_fields |= field_names - available
        else:
            field_names = available
        if self.exclude:
            field_names = field_names - self.exclude
            invalid_fields |= self.exclude - available
        if invalid_fields:
            message = f"Invalid fields for {self}: {invalid_fields}."
            raise ValueError(message)
        fields_dict = self.dict_class()
        for field_name in field_names:
            field_obj = self.declared_fields.get(field_name, ma_fields.Inferred())
            field_obj.bind(field_name, self)
            fields_dict[field_name] = field_obj
        for name, field_obj in fields_dict.items():
            if not field_obj.dump_only:
                self.load_fields[name] = field_obj
            if not field_obj.load_only:
                self.dump_fields[name] = field_obj
        self.fields = fields_dict

    def _invoke_field_validators(self, data: dict, errors: dict) -> None:
        """Run the validators of each field; an invalid value records the field's error messages."""
        for name, field_obj in self.load_fields.items():
            if name not in data:
                continue
            try:
                field_obj.validate(data[name])
            except ValidationError as error:
                errors.setdefault(name, []).extend(error.messages)

    def _check_unknown(self, data: dict, errors: dict) -> None:
        """Unknown keys in the input: raise, exclude or include them, as the ``unknown`` option says."""
        fields = {f.data_key or name for name, f in self.load_fields.items()}
        for key in set(data) - fields:
            if self.unknown == "raise":
                errors.setdefault(key, []).append("Unknown field.")

    def load(self, data, *, many: bool | None = None, partial=None):
        """Deserialize ``data``; raise ValidationError with every invalid field's messages."""
        many = self.many if many is None else many
        if many:
            return [self.load(item, many=False, partial=partial) for item in data]
        errors: dict[str, list[str]] = {}
        self._check_unknown(data, errors)
        self._invoke_field_validators(data, errors)
        if errors:
            raise ValidationError(errors, data=data)
        return {name: f.deserialize(data[name]) for name, f in self.load_fields.items() if name in data}

    def dump(self, obj, *, many: bool | None = None):
        """Serialize ``obj`` (a list of them with ``many=True``) by the dump fields."""
        many = self.many if many is None else many
        if many:
            return [self.dump(item, many=False) for item in obj]
        return {name: f.serialize(name, obj) for name, f in self.dump_fields.items()}

    def validate(self, data, *, many: bool | None = None, partial=None) -> dict[str, list[str]]:
        """The error messages of invalid fields in ``data``, by field name (empty when it is valid)."""
        try:
            self.load(data, many=many, partial=partial)
        except ValidationError as error:
            return error.messages
        return {}
'''

FIELDS_PY = '''\
"""Field classes: each validates, deserializes and serializes one value of a schema."""

from __future__ import annotations

from .exceptions import ValidationError


class Field:
    """Base field. ``default_error_messages`` holds the messages of its invalid values, by key."""

    default_error_messages = {
        "required": "Missing data for required field.",
        "null": "Field may not be null.",
        "validator_failed": "Invalid value.",
    }

    def __init__(self, *, data_key=None, load_only=False, dump_only=False, required=False, validate=None):
        self.data_key = data_key
        self.load_only = load_only
        self.dump_only = dump_only
        self.required = required
        self.validators = [validate] if callable(validate) else list(validate or ())
        self.name = None
        self.parent = None

    def bind(self, field_name: str, schema) -> None:
        """Bind the field to its schema under ``field_name``."""
        self.name = field_name
        self.parent = schema

    def make_error(self, key: str, **kwargs) -> ValidationError:
        """A ValidationError with the field's message for ``key``."""
        return ValidationError(self.default_error_messages[key].format(**kwargs))

    def validate(self, value) -> None:
        """Run the validators; an invalid value raises the field's error."""
        for validator in self.validators:
            if validator(value) is False:
                raise self.make_error("validator_failed")

    def deserialize(self, value):
        return value

    def serialize(self, attr: str, obj):
        return getattr(obj, attr, None) if not isinstance(obj, dict) else obj.get(attr)


class Inferred(Field):
    """A field for a name the schema does not declare (the ``additional`` option)."""


class String(Field):
    default_error_messages = {"invalid": "Not a valid string."}

    def deserialize(self, value):
        if not isinstance(value, str):
            raise self.make_error("invalid")
        return value


class Integer(Field):
    default_error_messages = {"invalid": "Not a valid integer.", "too_large": "Number too large."}

    def deserialize(self, value):
        try:
            return int(value)
        except (TypeError, ValueError) as error:
            raise self.make_error("invalid") from error


class Nested(Field):
    """A field holding another schema: ``only`` and ``exclude`` name the nested fields to keep or drop."""

    def __init__(self, schema, *, only=None, exclude=(), many=False, **kwargs):
        super().__init__(**kwargs)
        self.schema = schema
        self.only = only
        self.exclude = exclude
        self.many = many

    def deserialize(self, value):
        schema = self.schema(only=self.only, exclude=self.exclude, many=self.many)
        return schema.load(value)
'''

EXCEPTIONS_PY = '''\
"""Errors raised by schemas and fields."""


class MarshmallowError(Exception):
    """Base class of the library's errors."""


class RegistryError(NameError):
    """Raised when a schema class cannot be found by its name, or its name is held by several classes."""


class ValidationError(MarshmallowError):
    """Raised when validation fails on a field or a schema: ``messages`` holds the error messages of each invalid
    field, by field name, or a list of messages."""

    def __init__(self, message, field_name: str = "_schema", data=None) -> None:
        self.messages = [message] if isinstance(message, str) else message
        self.field_name = field_name
        self.data = data
        super().__init__(message)
'''

TEST_SCHEMA_PY = '''\
import pytest

from serial import fields
from serial.schema import Schema


class UserSchema(Schema):
    name = fields.String(required=True)
    email = fields.String()
    age = fields.Integer()


def test_load_valid_user():
    assert UserSchema(many=False).load({"name": "Ann", "age": "7"}) == {"name": "Ann", "age": 7}


def test_invalid_age_reports_the_field():
    errors = UserSchema(many=False).validate({"name": "Ann", "age": "seven"})
    assert errors == {"age": ["Not a valid integer."]}


def test_only_with_unknown_fields_raises():
    with pytest.raises(ValueError, match="nmae"):
        UserSchema(only=("nmae",), many=False)


def test_many_users():
    users = UserSchema(many=True).load([{"name": "Ann"}, {"name": "Bob"}])
    assert [u["name"] for u in users] == ["Ann", "Bob"]
'''

HTTP_ERROR_JS = '''\
export class HTTPError extends Error {
\tconstructor(response, request, options) {
\t\tconst code = (response.status || response.status === 0) ? response.status : '';
\t\tconst title = response.statusText || '';
\t\tconst status = `${code} ${title}`.trim();
\t\tconst reason = status ? `status code ${status}` : 'an unknown error';
\t\tsuper(`Request failed with ${reason}: ${request.method} ${request.url}`);
\t\tthis.name = 'HTTPError';
\t\tthis.response = response;
\t\tthis.request = request;
\t\tthis.options = options;
\t}
}

export class TimeoutError extends Error {
\tconstructor(request) {
\t\tsuper(`Request timed out: ${request.method} ${request.url}`);
\t\tthis.name = 'TimeoutError';
\t\tthis.request = request;
\t}
}
'''

CLIENT_JS = '''\
import {HTTPError, TimeoutError} from './errors.js';

const retryStatusCodes = new Set([408, 413, 429, 500, 502, 503, 504]);

export async function fetchWithRetry(request, options) {
\tlet attempt = 0;
\twhile (true) {
\t\tconst response = await fetch(request.clone());
\t\t// A request failed with a status code worth retrying (a 503 or a 429) is sent again after a delay.
\t\tif (!response.ok && retryStatusCodes.has(response.status) && attempt < options.retry.limit) {
\t\t\tattempt++;
\t\t\tawait new Promise(resolve => setTimeout(resolve, 300 * (2 ** attempt)));
\t\t\tcontinue;
\t\t}
\t\tif (!response.ok && options.throwHttpErrors) {
\t\t\tthrow new HTTPError(response, request, options);
\t\t}
\t\treturn response;
\t}
}

export function statusText(status) {
\t// The reason phrase of a status code, for requests whose response has none.
\tconst reasons = {400: 'Bad Request', 401: 'Unauthorized', 404: 'Not Found', 500: 'Internal Server Error'};
\treturn reasons[status] || 'Unknown status';
}

export function timeout(request, ms) {
\treturn new Promise((resolve, reject) => {
\t\tsetTimeout(() => reject(new TimeoutError(request)), ms);
\t});
}
'''

CONFIG_C = '''\
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

/* Open the config file at path, or the default config file when path is NULL. */
static FILE *open_config(const char *prog, const char *path)
{
\tFILE *fp = fopen(path ? path : DEFAULT_CONFIG_FILE, "r");
\tif (fp == NULL) {
\t\tfprintf(stderr, "%s: error: cannot open config file '%s': %s\\n", prog, path, strerror(errno));
\t\treturn NULL;
\t}
\treturn fp;
}

/* Parse one "key = value" line of a config file into cfg; returns -1 on an invalid line. */
static int parse_line(struct config *cfg, const char *line, int lineno)
{
\tchar key[64], value[256];
\tif (sscanf(line, " %63[^= ] = %255[^\\n]", key, value) != 2) {
\t\tfprintf(stderr, "config:%d: expected key = value\\n", lineno);
\t\treturn -1;
\t}
\treturn config_set(cfg, key, value);
}

int load_config(const char *prog, const char *path, struct config *cfg)
{
\tchar line[512];
\tint lineno = 0;
\tFILE *fp = open_config(prog, path);
\tif (fp == NULL)
\t\treturn -1;
\twhile (fgets(line, sizeof line, fp) != NULL) {
\t\tlineno++;
\t\tif (line[0] == '#' || line[0] == '\\n')
\t\t\tcontinue;
\t\tif (parse_line(cfg, line, lineno) < 0) {
\t\t\tfclose(fp);
\t\t\treturn -1;
\t\t}
\t}
\tfclose(fp);
\treturn 0;
}
'''

MAIN_C = '''\
#include <stdio.h>

#include "config.h"

/* Open the log file named by the config, or stderr; a file that cannot be opened falls back to stderr. */
static FILE *open_log(const struct config *cfg)
{
\tFILE *fp = cfg->log_file ? fopen(cfg->log_file, "a") : NULL;
\treturn fp ? fp : stderr;
}

int main(int argc, char **argv)
{
\tstruct config cfg = {0};
\tconst char *config_file = argc > 1 ? argv[1] : NULL;
\tif (load_config(argv[0], config_file, &cfg) < 0)
\t\treturn 1;
\tFILE *log = open_log(&cfg);
\tfprintf(log, "started with config file %s\\n", config_file ? config_file : "(default)");
\treturn 0;
}
'''

KEYMAP_GO = '''\
package keys

import (
\t"fmt"
\t"strings"
)

// Action is what a key binding does.
type Action string

// Keymap binds keys to actions.
type Keymap struct {
\tbindings map[string]Action
\tactions  map[Action]bool
}

// NewKeymap returns a keymap that knows the given actions.
func NewKeymap(actions ...Action) *Keymap {
\tk := &Keymap{bindings: map[string]Action{}, actions: map[Action]bool{}}
\tfor _, a := range actions {
\t\tk.actions[a] = true
\t}
\treturn k
}

// Bind binds a key (such as "ctrl+q") to an action the keymap knows.
func (k *Keymap) Bind(key string, action Action) error {
\tif !k.actions[action] {
\t\treturn fmt.Errorf("unknown key binding %q for action %s", key, action)
\t}
\tk.bindings[strings.ToLower(key)] = action
\treturn nil
}

// Lookup returns the action bound to a key, if any.
func (k *Keymap) Lookup(key string) (Action, bool) {
\ta, ok := k.bindings[strings.ToLower(key)]
\treturn a, ok
}

// Help lists every key binding, one per line, for the help view.
func (k *Keymap) Help() string {
\tvar b strings.Builder
\tfor key, action := range k.bindings {
\t\tfmt.Fprintf(&b, "%-10s %s\\n", key, action)
\t}
\treturn b.String()
}
'''

MANIFEST_RS = '''\
use std::fs;
use std::path::Path;

use anyhow::{anyhow, Context, Result};

/// A package manifest: its name, version and dependencies.
#[derive(Debug, Default)]
pub struct Manifest {
    pub name: String,
    pub version: String,
    pub dependencies: Vec<(String, String)>,
}

/// Parse the manifest at `path`; every field a manifest must have is checked.
pub fn parse_manifest(path: &Path) -> Result<Manifest> {
    let text = fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let table: toml::Table = text.parse()?;
    let mut manifest = Manifest::default();
    for field in ["name", "version"] {
        let value = table
            .get(field)
            .and_then(|v| v.as_str())
            .ok_or_else(|| anyhow!("failed to parse manifest at `{}`: missing field `{}`", path.display(), field))?;
        match field {
            "name" => manifest.name = value.to_string(),
            _ => manifest.version = value.to_string(),
        }
    }
    manifest.dependencies = dependencies(&table);
    Ok(manifest)
}

/// The manifest's dependencies, as (name, version requirement) pairs.
fn dependencies(table: &toml::Table) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(deps) = table.get("dependencies").and_then(|d| d.as_table()) {
        for (name, req) in deps {
            // A missing version field in a dependency means any version.
            out.push((name.clone(), req.as_str().unwrap_or("*").to_string()));
        }
    }
    out
}
'''

VCS_SH = '''\
#!/usr/bin/env bash
# vcs: a small wrapper around git for the project's release steps.

set -euo pipefail

vcs_root() {
  # The top directory of the git repository holding the current directory.
  git rev-parse --show-toplevel 2>/dev/null
}

vcs_require_repo() {
  local dir="$1"
  if ! git -C "$dir" rev-parse --git-dir >/dev/null 2>&1; then
    echo "Error: directory '$dir' is not a git repository (run \\`vcs init\\` first)" >&2
    return 1
  fi
}

vcs_init() {
  local dir="${1:-.}"
  # Initialise a git repository in the directory unless it is one already.
  git -C "$dir" rev-parse --git-dir >/dev/null 2>&1 || git init "$dir"
}

vcs_tag() {
  local dir="$1" version="$2"
  vcs_require_repo "$dir"
  printf 'tagging %s in directory %s\\n' "$version" "$dir"
  git -C "$dir" tag -a "v$version" -m "Release $version"
}
'''

USERS_JS = '''\
import {fetchWithRetry, statusText} from './client.js';

const API = 'https://api.example.com';

// GET https://api.example.com/users/:id: the user, or null when the API answers 404 Not Found.
export async function getUser(id) {
\tconst request = new Request(`${API}/users/${id}`, {method: 'GET'});
\tconst response = await fetchWithRetry(request, {retry: {limit: 2}, throwHttpErrors: false});
\tif (response.status === 404) {
\t\treturn null;
\t}
\tif (!response.ok) {
\t\tthrow new Error(statusText(response.status));
\t}
\treturn response.json();
}

// GET https://api.example.com/users: every user, page by page (404 Not Found ends the pages).
export async function listUsers() {
\tconst users = [];
\tfor (let page = 1; ; page++) {
\t\tconst request = new Request(`${API}/users?page=${page}`, {method: 'GET'});
\t\tconst response = await fetchWithRetry(request, {retry: {limit: 2}, throwHttpErrors: false});
\t\tif (response.status === 404) {
\t\t\treturn users;
\t\t}
\t\tusers.push(...await response.json());
\t}
}
'''

CONFIG_H = '''\
#ifndef MYAPP_CONFIG_H
#define MYAPP_CONFIG_H

/* The config file read when none is given: /etc/myapp.conf (no such file is fine: the defaults apply). */
#define DEFAULT_CONFIG_FILE "/etc/myapp.conf"

struct config {
\tconst char *log_file;
\tconst char *data_directory;
\tint port;
};

int load_config(const char *prog, const char *path, struct config *cfg);
int config_set(struct config *cfg, const char *key, const char *value);

#endif
'''

PATHS_C = '''\
#include <stdlib.h>
#include <string.h>

#include "config.h"

/* The directory of the user's config file: $XDG_CONFIG_HOME/myapp, else ~/.config/myapp; when no such directory
 * exists the config file is /etc/myapp.conf. Returns a newly allocated path to the config file. */
char *config_file_path(void)
{
\tconst char *base = getenv("XDG_CONFIG_HOME");
\tconst char *home = getenv("HOME");
\tchar *path = malloc(4096);
\tif (base != NULL)
\t\tsnprintf(path, 4096, "%s/myapp/myapp.conf", base);
\telse if (home != NULL)
\t\tsnprintf(path, 4096, "%s/.config/myapp/myapp.conf", home);
\telse
\t\tstrcpy(path, DEFAULT_CONFIG_FILE);
\treturn path;
}

/* Set one config key; an unknown key is an error (no such setting). */
int config_set(struct config *cfg, const char *key, const char *value)
{
\tif (strcmp(key, "log_file") == 0)
\t\tcfg->log_file = strdup(value);
\telse if (strcmp(key, "data_directory") == 0)
\t\tcfg->data_directory = strdup(value);
\telse if (strcmp(key, "port") == 0)
\t\tcfg->port = atoi(value);
\telse
\t\treturn -1;
\treturn 0;
}
'''

DEFAULTS_GO = '''\
package keys

// The actions of the TUI.
const (
\tActionQuit   Action = "quit"
\tActionHelp   Action = "help"
\tActionUp     Action = "up"
\tActionDown   Action = "down"
\tActionSearch Action = "search"
)

// DefaultBindings binds each action to its keys: quit to ctrl+q and ctrl+c, help to ?, search to /.
var DefaultBindings = map[Action][]string{
\tActionQuit:   {"ctrl+q", "ctrl+c"},
\tActionHelp:   {"?"},
\tActionUp:     {"up", "k"},
\tActionDown:   {"down", "j"},
\tActionSearch: {"/"},
}

// DefaultKeymap returns a keymap with every default key binding of every action (quit, help, up, down, search).
func DefaultKeymap() *Keymap {
\tk := NewKeymap(ActionQuit, ActionHelp, ActionUp, ActionDown, ActionSearch)
\tfor action, keys := range DefaultBindings {
\t\tfor _, key := range keys {
\t\t\t// Every default binding is of a known action: a panic here is a bug in DefaultBindings.
\t\t\tif err := k.Bind(key, action); err != nil {
\t\t\t\tpanic(err)
\t\t\t}
\t\t}
\t}
\treturn k
}
'''

WORKSPACE_RS = '''\
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::manifest::{parse_manifest, Manifest};

/// A workspace: the root manifest (Cargo.toml at the root) and the manifest of each member.
pub struct Workspace {
    pub root: PathBuf,
    pub members: Vec<Manifest>,
}

/// Load the workspace at `root`: parse the root Cargo.toml manifest, then each member's Cargo.toml manifest.
pub fn load_workspace(root: &Path) -> Result<Workspace> {
    let root_manifest = parse_manifest(&root.join("Cargo.toml"))?;
    let mut members = vec![];
    for name in member_names(root)? {
        // A member's manifest lacking a name field fails to parse: the error names the member's Cargo.toml.
        members.push(parse_manifest(&root.join(&name).join("Cargo.toml"))?);
    }
    members.push(root_manifest);
    Ok(Workspace { root: root.to_path_buf(), members })
}

/// The member directories of the workspace at `root` (each holds a Cargo.toml manifest).
fn member_names(root: &Path) -> Result<Vec<String>> {
    let mut out = vec![];
    for entry in std::fs::read_dir(root)? {
        let path = entry?.path();
        if path.join("Cargo.toml").is_file() {
            out.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    Ok(out)
}
'''

SITE_SH = '''\
#!/usr/bin/env bash
# site: deploy the static site into /srv/site, a git repository the deploy commits to.

set -euo pipefail

SITE_DIR="${SITE_DIR:-/srv/site}"

site_prepare() {
  # The first deploy makes /srv/site a git repository: run vcs init on the directory.
  mkdir -p "$SITE_DIR"
  vcs_init "$SITE_DIR"
}

site_deploy() {
  local build_dir="$1"
  # Copy the build into the site directory, then commit it to the site's git repository.
  rsync -a --delete --exclude .git "$build_dir/" "$SITE_DIR/"
  git -C "$SITE_DIR" add -A
  git -C "$SITE_DIR" commit -q -m "deploy $(date -u +%FT%TZ)" || true
}
'''

REGISTRY_PY = '''\
"""A registry of schema classes by name, so that a nested field may name its schema by a string: the class name
(``"Author"``) or the full module path (``"app.schemas.Author"``) when two modules declare a class of that name."""

from __future__ import annotations

import logging

from .exceptions import RegistryError

logger = logging.getLogger(__name__)

_registry: dict[str, list[type]] = {}


def register(classname: str, cls: type) -> None:
    """Add a schema class to the registry under its class name and its full module path."""
    module = cls.__module__
    fullpath = ".".join([module, classname])
    if classname in _registry and not any(each.__module__ == module for each in _registry[classname]):
        _registry[classname].append(cls)
    elif classname not in _registry:
        _registry[classname] = [cls]
    _registry.setdefault(fullpath, []).append(cls)
    logger.debug("registered schema class %s as %s", classname, fullpath)


def classes_named(classname: str) -> list[type]:
    """Every class registered with this name (a class name or a full path); none found: an empty list. A name
    with several classes is found by the full path of each class, which is never ambiguous."""
    return list(_registry.get(classname, ()))


def get_class(classname: str, all: bool = False):
    """The schema class registered with the name ``classname``: a class name, or the full module path of the
    class when several classes have the same name (``all``: every class with that name)."""
    try:
        classes = _registry[classname]
    except KeyError as error:
        raise RegistryError(
            "Class with name {!r} was not found. You may need to import the class.".format(classname)
        ) from error
    if len(classes) > 1:
        if all:
            return _registry[classname]
        raise RegistryError(
            "Multiple classes with name %r were found. Please use the full, module-qualified path." % classname
        )
    return _registry[classname][0]


def unregister(classname: str) -> None:
    """Remove every class registered with the name ``classname`` (the class name and each full path)."""
    for cls in _registry.pop(classname, ()):
        fullpath = ".".join([cls.__module__, classname])
        classes = [c for c in _registry.get(fullpath, ()) if c is not cls]
        if classes:
            _registry[fullpath] = classes
        else:
            _registry.pop(fullpath, None)
'''

README_MD = '''\
# serial

Declare schemas, then load and dump objects. Invalid fields raise `ValueError` when a schema is made
(`only` or `exclude` names a field the schema does not declare); invalid values raise `ValidationError` on load.

The HTTP client retries requests that failed with a status code such as 503, and throws `HTTPError` for the others.
'''

FILES = {
    "serial/__init__.py": '"""serial: schemas for loading and dumping objects."""\n',
    "serial/schema.py": SCHEMA_PY,
    "serial/fields.py": FIELDS_PY,
    "serial/exceptions.py": EXCEPTIONS_PY,
    "serial/registry.py": REGISTRY_PY,
    "tests/test_schema.py": TEST_SCHEMA_PY,
    "web/errors.js": HTTP_ERROR_JS,
    "web/client.js": CLIENT_JS,
    "web/users.js": USERS_JS,
    "cli/config.c": CONFIG_C,
    "cli/config.h": CONFIG_H,
    "cli/paths.c": PATHS_C,
    "cli/main.c": MAIN_C,
    "tui/keys/keymap.go": KEYMAP_GO,
    "tui/keys/defaults.go": DEFAULTS_GO,
    "pkg/src/manifest.rs": MANIFEST_RS,
    "pkg/src/workspace.rs": WORKSPACE_RS,
    "tools/vcs.sh": VCS_SH,
    "tools/site.sh": SITE_SH,
    "README.md": README_MD,
}

MESSAGES = {
    "python f-string": ("ValueError: Invalid fields for <UserSchema(many=False)>: {'nmae'}.", "serial/schema.py",
                        'message = f"Invalid fields for {self}: {invalid_fields}."'),
    "python format": ("serial.exceptions.RegistryError: Class with name 'Author' was not found. You may need to "
                      "import the class.", "serial/registry.py",
                      '"Class with name {!r} was not found. You may need to import the class.".format(classname)'),
    "python percent": ("RegistryError: Multiple classes with name 'User' were found. Please use the full, "
                       "module-qualified path.", "serial/registry.py",
                       '"Multiple classes with name %r were found. Please use the full, module-qualified path." %'),
    "javascript template literal": ("HTTPError: Request failed with status code 404 Not Found: GET "
                                    "https://api.example.com/users/7", "web/errors.js",
                                    "super(`Request failed with ${reason}: ${request.method} ${request.url}`);"),
    "c printf": ("myapp: error: cannot open config file '/etc/myapp.conf': No such file or directory",
                 "cli/config.c", '"%s: error: cannot open config file \'%s\': %s\\n"'),
    "go fmt.Errorf": ('panic: unknown key binding "ctrl+q" for action quit', "tui/keys/keymap.go",
                      'fmt.Errorf("unknown key binding %q for action %s", key, action)'),
    "rust format": ("Error: failed to parse manifest at `/work/app/Cargo.toml`: missing field `name`",
                    "pkg/src/manifest.rs", 'anyhow!("failed to parse manifest at `{}`: missing field `{}`"'),
    "bash echo": ("Error: directory '/srv/site' is not a git repository (run `vcs init` first)", "tools/vcs.sh",
                  "echo \"Error: directory '$dir' is not a git repository"),
}


def write_tree(root: Path) -> Path:
    """Write the project under ``root``; returns ``root``."""
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root
