"""Pure-Python distributions of the interpreter running the tests, lent to the other interpreters
under test through PYTHONPATH (they are built bare: no pytest, no IPython): a folder holding
links to each distribution's files and metadata, with everything it requires."""
import importlib.metadata
import pathlib

from packaging.requirements import Requirement


def lend(folder, *names):
    """Fills `folder` (a pathlib.Path) with `names` and their requirements; returns it."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name.lower() in seen:
            continue
        seen.add(name.lower())
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # a requirement of another platform's (appnope) or an old Python's
        for text in distribution.requires or ():
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
        for top in {pathlib.Path(f).parts[0] for f in distribution.files}:
            source = pathlib.Path(distribution.locate_file(top))
            if top not in ("..", "__pycache__") and source.exists() and \
                    not (folder / top).exists():
                (folder / top).symlink_to(source)
    return folder
