"""The scripts' libraries (lowkiq/store/scripts/_*.lua, in lowkiq.store.lua.LIBRARIES' order): a script gets the
definitions it uses and those they use, which only works if each definition uses only the ones above it."""

from __future__ import annotations

from importlib import resources

from lowkiq.store import lua

FOLDER = resources.files("lowkiq.store.scripts")


def definitions() -> list[tuple[str, str, str]]:
    """(library, name, code without its comment lines) of every top-level definition, in the scripts' order."""
    found: list[tuple[str, str, str]] = []
    for library in lua.LIBRARIES:
        for line in FOLDER.joinpath(f"{library}.lua").read_text(encoding="utf-8").splitlines(keepends=True):
            start = lua._DEFINITION.match(line)
            if start:
                found.append((library, start.group(1), line))
            elif found and not line.startswith("--"):
                found[-1] = (*found[-1][:2], found[-1][2] + line)
    return found


def test_every_library_is_in_the_list_and_each_definition_uses_only_the_ones_above_it():
    on_disk = {p.name.removesuffix(".lua") for p in FOLDER.iterdir() if p.name.startswith("_") and p.name.endswith(".lua")}
    assert on_disk == set(lua.LIBRARIES)
    found = definitions()
    names = [name for _, name, _ in found]
    assert len(names) == len(set(names)), "a name defined twice"
    later = []
    for position, (library, name, code) in enumerate(found):
        for word in set(lua._WORD.findall(code)) - {name}:
            if word in names[position + 1:]:
                later.append(f"{library}.lua: {name} uses {word}, defined below it")
    assert later == []


def test_a_script_gets_the_definitions_it_uses_from_every_library():
    # ack_and_take uses something of nearly every topic: the clock, payloads, groups, spill, tags, history, leases
    source = lua.script("ack_and_take").source
    for name in ("server_clock", "encode", "group_drop", "spill_read", "tags_forget", "history_held",
                 "refusal", "acknowledge", "depend_settled"):
        assert f"local function {name}(" in source, name
    assert "local function content_matches(" not in source  # an operators' filter: not the take's


def test_rare_definitions_are_built_only_by_rare():
    # push names its merge, cap, morgue, group and tag helpers --#rare: a push of new ids builds none of them
    source = lua.script("push").source
    top, _, inside = source.partition("local function rare()")
    assert inside, "push.lua's rare definitions are not wrapped"
    assert "local function payloads_merge(" not in top and "local function payloads_merge(" in inside
    assert "local function history_add(" in top and "local function history_add(" not in inside
    # a definition the hot path uses stays top-level even when a rare one uses it too
    assert "local function num(" in top


def test_rare_keeps_what_the_hot_path_uses_at_the_top():
    lib = ("local function a() return 1 end\n"
           "local function b() return a() end\n"
           "local function c() return b() end\n")
    body = "--#rare c\nlocal x = b()\nrare()\nreturn c()\n"
    assembled = lua.used_definitions(lib, body, {"c"})
    top, _, inside = assembled.partition("local function rare()")
    assert "local function a(" in top and "local function b(" in top
    assert "local function c(" in inside and "local function c(" not in top


def test_words_in_comments_and_strings_build_nothing():
    # each definition a script gets is a closure built on every call: a comment saying "before" or a string
    # holding "b" must not make the script build before() or b()
    lib = ("local function before() return 1 end\n"
           "-- a comment that names before()\n"
           "local function b() return 2 end\n"
           "local function c() return b() end\n")
    body = "-- run before the writes\nlocal s = 'b' .. \"before\" --[[ before\nb ]]\nreturn c()\n"
    assembled = lua.used_definitions(lib, body)
    assert "local function c(" in assembled and "local function b(" in assembled  # c calls b: kept
    assert "local function before(" not in assembled
    # the scripts themselves: push's comments say "before", the take's group comments name group_put
    hot_push, _, _ = lua.script("push").source.partition("local function rare()")
    assert "local function before(" not in hot_push  # the merge builds it, in rare()
    assert "local function group_put(" not in lua.script("ack_and_take").source
