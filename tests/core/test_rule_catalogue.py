"""The rule catalogue (gguf_construct.core.rules, schema/rules.json): every raise site names a catalogue rule, never a
free-standing string; each rule raises its catalogue class; the strategies' breakers name catalogue rules, and each
breaker's file really is rejected with its rule."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import drawn
from rule_scan import raise_sites

from gguf_construct import validate as validate_bytes
from gguf_construct.core import rules
from gguf_construct.errors import FormatError, TruncatedError
from gguf_construct.testing.strategies import INVALID_CLASSES, invalid_gguf
from gguf_construct.testing.strategies.hostile import HOSTILE
from gguf_construct.validation import Issue

#: Raise sites whose class differs from the catalogue's on purpose: tables.py sits below the catalogue (rules.py
#: loads its tables through it): it names its rules by id, each raised as the catalogue's class.
KEEP = {("gguf_construct/core/tables.py", "types.user"), ("gguf_construct/core/tables.py", "tensor.type")}


def test_the_catalogue_loads_with_unique_constants():
    cat = rules.catalogue()
    assert len(cat) > 150
    assert len({r.constant for r in cat.values()}) == len(cat)
    for r in cat.values():
        assert r.doc and r.spec_ref and issubclass(r.error_class, FormatError), r
        assert getattr(rules, r.constant) is r
    with pytest.raises(AttributeError):
        rules.NO_SUCH_RULE  # noqa: B018


def test_no_raise_site_names_a_free_standing_rule_id():
    """Every rule at a raise site is ``rules.X`` (an attribute the catalogue resolves; a typo fails the scan)."""
    strings = [(rel, line, name, a.value) for rel, line, name, how, a in raise_sites() if how == "string"]
    free = [s for s in strings if (s[0], s[3]) not in KEEP and s[3] in rules.catalogue()]
    assert free == [], free
    unknown = [s for s in strings if s[3] not in rules.catalogue() and "." in s[3] and " " not in s[3]]
    assert unknown == [], unknown


def test_every_raise_site_raises_the_catalogue_class():
    """``XError(rules.Y, ...)`` would raise X whatever the catalogue says: raise sites call ``rules.Y.error``."""
    direct = [
        (rel, line, name, ast.unparse(a)) for rel, line, name, how, a in raise_sites() if how == "catalogue" and name in rules.CLASSES
    ]
    assert direct == [], direct


def test_rules_raise_their_class_and_truncation_raises_truncated_error():
    r = rules.TENSOR_N_DIMS
    err = r.error("5 dimensions", path="tensor_infos[0]", offset=9)
    assert type(err) is r.error_class and err.rule == "tensor.n_dims" and err.offset == 9
    assert type(r.truncated("count past the end")) is TruncatedError
    assert type(Issue(r, "x").error()) is r.error_class and Issue(r, "x").rule == "tensor.n_dims"
    assert Issue.from_error(err) == Issue("tensor.n_dims", "5 dimensions", "tensor_infos[0]", 9)


def test_every_breaker_names_catalogue_rules():
    cat = rules.catalogue()
    for label, (names, _) in INVALID_CLASSES.items():
        assert set(names) <= set(cat), (label, set(names) - set(cat))
    for h in HOSTILE:
        assert set(h.rules) <= set(cat), (h.name, set(h.rules) - set(cat))


def test_each_breaker_really_breaks_its_rules():
    """Each strategy class's generated files are rejected with one of the rules it names (S14's cuts name
    every truncation rule, a cut meets one of them); a rule only S14 names has a rule breaker of its own."""
    for label, (names, _) in sorted(INVALID_CLASSES.items()):
        for case in drawn(invalid_gguf(label), 3, seed_value=label):
            found = {i.rule for i in validate_bytes(case.data, case.profile) if i.severity == "error"}
            assert found & set(names), (label, found)


# -- every rule has a breaker, every breaker a rule --------------------------------------------------------------
def _rules_of(data: bytes, profile: str = "spec", hparams: str | None = None) -> set[str]:
    """Every rule validation reports for ``data`` (errors and warnings), and the strict reader's rule."""
    from gguf_construct import from_bytes
    from gguf_construct.validation.legacy_checks import validate_legacy_bytes

    found = {i.rule for i in (validate_legacy_bytes(data, profile, hparams) if hparams else validate_bytes(data, profile))}
    try:
        from_bytes(data, profile=profile)
    except FormatError as e:
        found.add(e.rule)
    except Exception:  # noqa: BLE001 - from_bytes reads GGUF only; other formats answer through validation
        pass
    return found


def observed(draws: int = 4) -> dict[str, set[str]]:
    """rule → the breakers whose generated inputs were rejected with it: the GGUF strategies' classes, the
    hostile catalogue, and the per-format rule tables of the tests (legacy rows, safetensors cases)."""
    out: dict[str, set[str]] = {}

    def add(found: set[str], name: str) -> None:
        for rule in found:
            out.setdefault(rule, set()).add(name)

    for label, (_, profile) in sorted(INVALID_CLASSES.items()):
        for case in drawn(invalid_gguf(label), draws, seed_value=label):
            add(_rules_of(case.data, profile), f"strategies:{label}")
    for h in HOSTILE:
        if h.rules:
            add(_rules_of(h.make()), f"hostile:{h.name}")
    return out


def breaker_coverage() -> dict[str, set[str]]:
    """rule → the names of the breakers (strategies' classes, hostile inputs, rule breakers) observed breaking it."""
    from gguf_construct.testing.strategies.rule_breakers import RULE_BREAKERS, rules_broken

    out = observed()
    for b in RULE_BREAKERS:
        for rule in rules_broken(b):
            out.setdefault(rule, set()).add(f"rule_breakers:{b.name}")
    return out


def test_each_rule_breaker_breaks_its_rule():
    from gguf_construct.testing.strategies.rule_breakers import RULE_BREAKERS, rules_broken

    cat = rules.catalogue()
    for b in RULE_BREAKERS:
        assert b.rule in cat, b
        assert b.rule in rules_broken(b), b


def test_every_rule_has_a_breaker_or_says_why_not():
    """Every catalogue rule is broken by a breaker on generated input, or its row says why none can (and then
    none does: an exemption goes when a breaker comes)."""
    cat = rules.catalogue()
    seen = breaker_coverage()
    assert set(seen) - set(cat) <= {"parse.truncated"} | {r for r in seen if r.startswith("internal.")}, set(seen) - set(cat)
    unbroken = sorted(r for r, rule in cat.items() if rule.no_breaker is None and r not in seen)
    assert unbroken == [], unbroken
    stale = sorted(r for r, rule in cat.items() if rule.no_breaker is not None and r in seen)
    assert stale == [], stale


def test_the_typed_constants_are_the_catalogue():
    """The annotations at the end of rules.py (what mypy and IDEs see) are generated from schema/: a rule added,
    renamed or removed there without ``python -m gguf_construct.core.rules --write`` fails here."""
    assert rules.generated_block(Path(rules.__file__).read_text()) == rules.render_constants()
    assert set(rules.__annotations__) >= {r.constant for r in rules.catalogue().values()}
