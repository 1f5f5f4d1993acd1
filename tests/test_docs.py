"""The README and docs/ pages: the two commands are the ones CI and the scripts run, every link
resolves, and the README stays a newcomer's first page."""

import re

from conftest import REPO

README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]


def test_the_two_commands_are_what_ci_and_the_scripts_run():
    block = README.read_text().split("## The two commands", 1)[1].split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in block.splitlines()[1:] if line.strip()]
    assert commands == ["bash scripts/main_job.sh", "bash scripts/test.sh"]
    for command in commands:
        assert (REPO / command.split()[1]).is_file()
    assert "bash scripts/test.sh" in (REPO / ".ci" / "run").read_text()


def test_every_relative_link_resolves():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.name} links to {target}, which is not there"


def test_readme_is_short_and_speaks_to_users():
    text = README.read_text()
    assert len(text.splitlines()) <= 150
    assert "(docs/preview.png)" in text
    for page in PAGES:
        assert not re.search(r"\bissue \d+", page.read_text(), re.IGNORECASE), f"{page.name} cites an issue number"
