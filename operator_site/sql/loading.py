"""Model instances as `Model.from_db` builds them, without its per-field `setattr` loop.

`read_many` builds ~160 instances per orientation packet; `Model.from_db` → `Model.__init__` was a
quarter of the packet's CPU. Django documents `from_db` as the hook of "customizing model loading"
and what an instance loaded from the database holds: its field values under their attnames and
`_state` (a `ModelState`, `adding` False, `db` the alias). `loader(model)` answers a function that
builds exactly that, and answers `model.from_db` itself whenever the shortcut could differ:

- a `pre_init` or `post_init` receiver is connected for the model (`Signal.has_listeners`: the
  shortcut sends no signal), checked on every call, since receivers come and go;
- the model overrides `__init__`, `from_db`, `__new__` or `__setattr__`;
- a field's attname is managed by a descriptor other than Django's own `DeferredAttribute` (no
  `__set__`: `setattr` writes the instance dict) or `ForeignKeyDeferredAttribute` (on a fresh
  instance its `__set__` writes the instance dict; for a value that is not None it first asks the
  state's `fields_cache`, which creates an empty one — reproduced here).

`attacher(model, name)` attaches a `select_related` row as the ORM's own `select_related` does
(`RelatedPopulator`: the forward field's cached value, and the reverse one of a one-to-one), not
through the descriptor's `__set__` (which also checks the instance's type and the routers, and
writes the foreign key it already holds).

Not documented by Django: the `ModelState` class (its instance is the documented `Model._state`)
and a field's `set_cached_value` (what the ORM's `select_related` calls). tests/test_sql.py
compares, for every model the packet reads, on both databases, every attribute and the `_state`
(with its cache of related rows) of instances built here with those the ORM builds, so a Django
upgrade that changes what they set fails there, not in an answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from django.db import models
from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.query_utils import DeferredAttribute
from django.db.models.signals import post_init, pre_init

Build = Callable[[str, Sequence[Any]], models.Model]


def _descriptor(model: type[models.Model], name: str) -> Any:
    for klass in model.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


@cache
def _shortcut(model: type[models.Model], attnames: tuple[str, ...]) -> Build | None:
    """The fast construction of `model` from the values of the fields `attnames` (in the model's
    order; the others deferred, as `from_db` leaves them: absent from the instance), or None when
    it could differ from `from_db` whatever the receivers (the model's own overrides, a field's own
    descriptor)."""
    base = models.Model
    if (
        model._meta.abstract
        or model.__init__ is not base.__init__
        or model.from_db.__func__ is not base.from_db.__func__
        or model.__new__ is not object.__new__
        or model.__setattr__ is not object.__setattr__
    ):
        return None
    foreign = []
    for i, attname in enumerate(attnames):
        kind = type(_descriptor(model, attname))
        if kind is ForeignKeyDeferredAttribute:
            foreign.append(i)
        elif kind is not DeferredAttribute:
            return None
    new = object.__new__

    def build(db: str, values: Sequence[Any]) -> models.Model:
        obj = new(model)
        state = ModelState()
        # What ForeignKeyDeferredAttribute.__set__ leaves on a fresh instance's state.
        for i in foreign:
            if values[i] is not None:
                state.fields_cache = {}
                break
        state.adding = False
        state.db = db
        attrs = obj.__dict__
        attrs["_state"] = state
        attrs.update(zip(attnames, values, strict=True))
        return obj

    return build


@cache
def attacher(model: type[models.Model], name: str) -> Callable[[models.Model, models.Model | None], None]:
    """A function (instance, related instance or None) that attaches the row of the forward
    relation `name` as the ORM's `select_related` does."""
    field = model._meta.get_field(name)
    local = field.set_cached_value
    if not field.unique:
        return local
    remote = field.remote_field.set_cached_value

    def attach(obj: models.Model, related: models.Model | None) -> None:
        local(obj, related)
        if related is not None:
            remote(related, obj)

    return attach


@cache
def all_attnames(model: type[models.Model]) -> tuple[str, ...]:
    return tuple(f.attname for f in model._meta.concrete_fields)


@cache
def _in_order(model: type[models.Model], attnames: tuple[str, ...]) -> tuple[str, ...]:
    if attnames != tuple(a for a in all_attnames(model) if a in attnames) or not attnames:
        raise ValueError(f"{model.__name__}: {attnames} are not some of its fields, in its order")
    return attnames


def loader(model: type[models.Model], attnames: tuple[str, ...] | None = None) -> Build:
    """A function (database alias, the values of the fields `attnames` in the model's order:
    by default every concrete field) → the instance `model.from_db(alias, attnames, values)`
    answers, the fields not named deferred; `from_db` itself when the shortcut could differ (see
    the module docstring)."""
    attnames = all_attnames(model) if attnames is None else _in_order(model, attnames)
    build = _shortcut(model, attnames)
    if build is None or pre_init.has_listeners(model) or post_init.has_listeners(model):
        return lambda db, values: model.from_db(db, attnames, list(values))
    return build
