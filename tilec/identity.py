"""A map and a set keyed by object identity, for keys that are not hashable or that compare by value (lists, dicts,
value dataclasses such as Diagnostic or DType). Standard library only.

IR nodes need neither: their dataclasses are declared with eq=False, so they hash and compare by identity, and
a plain dict or set keyed by the node is an identity map. These hold their keys, so an identity is never
reused while it is in the map (which a dict keyed by `id(x)` does not guarantee).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, MutableMapping, MutableSet


class IdentityDict(MutableMapping):
    """A dict whose keys are compared by identity (`is`), in insertion order."""

    def __init__(self, items: Iterable[tuple[object, object]] = ()):
        self._items: dict[int, tuple[object, object]] = {}
        for key, value in items:
            self[key] = value

    def __getitem__(self, key):
        return self._items[id(key)][1]

    def __setitem__(self, key, value) -> None:
        self._items[id(key)] = (key, value)

    def __delitem__(self, key) -> None:
        del self._items[id(key)]

    def __contains__(self, key) -> bool:
        return id(key) in self._items

    def __iter__(self) -> Iterator:
        return (key for key, _ in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __reduce__(self):  # copied (deepcopy, pickle) by its items: the copies' identities are new
        return (IdentityDict, (list(self.items()),))


class IdentitySet(MutableSet):
    """A set whose members are compared by identity (`is`), in insertion order."""

    def __init__(self, members: Iterable[object] = ()):
        self._members: dict[int, object] = {}
        for m in members:
            self.add(m)

    def __contains__(self, member) -> bool:
        return id(member) in self._members

    def __iter__(self) -> Iterator:
        return iter(self._members.values())

    def __len__(self) -> int:
        return len(self._members)

    def add(self, member) -> None:
        self._members[id(member)] = member

    def discard(self, member) -> None:
        self._members.pop(id(member), None)

    def __reduce__(self):  # copied (deepcopy, pickle) by its members: the copies' identities are new
        return (IdentitySet, (list(self),))
