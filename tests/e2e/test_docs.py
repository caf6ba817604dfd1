"""The docs that describe the code say what the code is: docs/architecture.md's file map names
every source file under src/ and says what it is, and the format documents state the versions
the code writes (docs/capture-format.md, docs/snapshot-index.md)."""
import re

from conftest import REPO, memlens

# A name in the file map: a path, possibly with a brace list (`chunk.{h,cc}`).
NAME = r"(?:[^\s,{]|\{[^}]*\})+"


def expand(name):
    """`chunk.{h,cc}` -> chunk.h, chunk.cc."""
    m = re.match(r"^(.*?)\{([^}]*)\}(.*)$", name)
    if not m:
        return [name]
    return [path for alt in m.group(2).split(",") for path in expand(m.group(1) + alt + m.group(3))]


def file_map(text):
    """{path: description} for every file under src/ that architecture.md's file map names.
    The map is the code block that starts with CMakeLists.txt: a line at column 0 names a folder
    (`src/agent/`), the lines indented under it name files in it (`hooks/interposers.cc`, several
    separated by ", "), each followed by what it is, on its line or on the next, indented
    further."""
    block = next(b for b in re.findall(r"^```\n(.*?)^```", text, re.M | re.S)
                 if b.startswith("CMakeLists.txt"))
    named, folder, last = {}, None, []
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            folder = line.split()[0] if line.startswith("src/") else None
            last = []
        elif folder and indent > 2:  # the description of the line before, continued
            for path in last:
                named[path] = named[path] or line.strip()
        elif folder:
            names, description = re.match(rf"({NAME}(?:, {NAME})*)\s*(.*)", line.strip()).groups()
            last = [folder + path for name in names.split(", ") for path in expand(name)
                    if not path.endswith("/")]
            for path in last:
                named[path] = description.strip()
    return named


def source_files():
    """Every file under src/ but Python's byte-code caches (no build output is written there)."""
    return sorted(str(path.relative_to(REPO)) for path in (REPO / "src").rglob("*")
                  if path.is_file() and "__pycache__" not in path.parts)


def test_file_map_names_every_source_file():
    named = file_map((REPO / "docs" / "architecture.md").read_text())
    files = source_files()
    assert len(files) > 100  # the listing worked
    missing = [f for f in files if f not in named]
    assert missing == [], "docs/architecture.md's file map does not name:\n" + "\n".join(missing)
    undescribed = [f for f in files if not named[f]]
    assert undescribed == [], "named without saying what it is:\n" + "\n".join(undescribed)
    gone = [path for path in named if path not in files]
    assert gone == [], "docs/architecture.md names files that do not exist:\n" + "\n".join(gone)


def constant(name):
    """The value of `inline constexpr ... NAME = N;`, wherever under src/ it is defined."""
    found = set()
    for path in (REPO / "src").rglob("*.h"):
        found.update(re.findall(rf"constexpr \w+ {name} = (\d+);", path.read_text()))
    assert len(found) == 1, f"{name}: {found or 'not found'} under src/"
    return int(found.pop())


def test_capture_format_doc_states_the_version_written():
    major, minor = constant("kFormatMajor"), constant("kFormatMinor")
    doc = (REPO / "docs" / "capture-format.md").read_text()
    title = re.match(r"# Capture format \(`\.mlens`\), version (\d+)\.(\d+)\n", doc)
    assert title and tuple(map(int, title.groups())) == (major, minor), doc.splitlines()[0]
    assert f"currently {major} (`kFormatMajor`)" in doc
    assert f"currently {minor} (`kFormatMinor`)" in doc


def test_snapshot_index_doc_states_the_version_written():
    version = constant("kIndexVersion")
    doc = (REPO / "docs" / "snapshot-index.md").read_text()
    stated = re.findall(r"currently (\d+) \(`kIndexVersion`\)", doc)
    assert stated == [str(version)], f"kIndexVersion is {version}; the doc states {stated}"


def test_every_command_is_helped_exampled_and_documented():
    """main.cc's one list of commands reaches everything that lists them: the help's commands
    and examples, the unknown-command message, README.md, and one cmd_<name>.cc per command."""
    help_text = memlens("--help").stdout
    section = help_text.split("Subcommands:\n")[1].split("\n\n")[0]
    commands = [line.split()[0] for line in section.splitlines()]
    assert commands[:3] == ["run", "summary", "top"]
    examples = help_text.split("Examples:\n")[1]
    unknown = memlens("frobnicate").stderr
    assert f"(commands: {', '.join(commands)})" in unknown
    readme = (REPO / "README.md").read_text()
    for command in commands:
        assert f"  memlens {command} " in examples, command
        assert re.search(rf"^memlens {command} ", readme, re.M), f"no `memlens {command}` in README"
        assert (REPO / "src" / "cli" / f"cmd_{command}.cc").is_file(), command
