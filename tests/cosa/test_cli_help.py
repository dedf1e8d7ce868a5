"""The command line's help: plain text, a line for every option, one target's options per target,
presets listed; and the plain-text outputs of ``arch show`` and ``bound``."""

import argparse
import json
import re

import pytest

from algorithms.cp import cli as cp_cli
from costmodel import list_presets
from cosa import cli_casgd, cli_mpi, cli_randnla, cli_serve, cli_targets
from cosa.cli import build_parser, main


def _parsers():
    """Every parser the command line reaches: the main tree and the targets' own command lines."""
    return [("cosa", build_parser()), ("cosa run lstsq|rsvd|pencil", cli_randnla.build_parser()),
            ("cosa run casgd", cli_casgd.build_parser()), ("cosa run mpi", cli_mpi.parser()),
            ("cosa run cp", cp_cli.build_parser()), ("cosa serve", cli_serve.build_parser())]


def _walk(parser, path):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, f"{path} {name}")


def _help(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as stop:
        main(list(argv) + ["--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


def test_every_option_has_help_in_plain_text():
    missing, markup = [], []
    for root, parser in _parsers():
        for path, p in _walk(parser, root):
            texts = [p.description or "", p.epilog or ""]
            for action in p._actions:
                if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                    continue
                if not action.help:
                    missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
                texts.append(action.help or "")
            markup += [f"{path}: {t}" for t in texts if "``" in t or ":func:" in t or ":class:" in t]
    assert not missing, missing
    assert not markup, markup


def test_top_level_help_is_plain_and_lists_commands(capsys):
    out = _help(capsys)
    assert "``" not in out and "exit status" in out
    for command in ("show", "arch", "evaluate", "schedule", "compare", "bound", "emit", "build", "run", "serve"):
        assert f"    {command} " in out


def test_arch_options_list_the_presets(capsys):
    for argv in (("compare",), ("schedule",), ("evaluate",), ("bound",), ("run", "cpu"), ("emit", "opencl")):
        text = re.sub(r"-\s+", "-", " ".join(_help(capsys, *argv).split()))  # argparse may wrap after a hyphen
        assert all(name in text for name in list_presets()), argv
    out = re.sub(r"-\s+", "-", " ".join(_help(capsys, "compare").split()))
    assert "--jobs JOBS layers scheduled side by side" in out and "--csv FILE also write the rows as CSV" in out
    assert "--plot FILE.png also draw" in out and "Exit status 1 when a scheduler failed" in out


def test_run_help_lists_targets_and_each_target_has_its_own_options(capsys):
    out = _help(capsys, "run")
    for target in ("gemmini", *cli_targets.TARGETS, *cli_randnla.DRIVERS):
        assert f"    {target} " in out, target
    assert "--sim" not in out and "--threads" not in out and "--style" not in out  # no merged option soup
    gemmini = _help(capsys, "run", "gemmini")
    assert "--sim" in gemmini and "--style" in gemmini and "--threads" not in gemmini and "--arch" not in gemmini
    cpu = _help(capsys, "run", "cpu")
    assert "--threads" in cpu and "--arch" in cpu and "--sim" not in cpu and "--style" not in cpu
    assert "--threads" not in _help(capsys, "run", "opencl")
    lstsq = _help(capsys, "run", "lstsq")
    assert all(option in lstsq for option in ("--synthetic", "--sketch", "--method"))
    assert "--main" in _help(capsys, "emit", "gemmini") and "--main" not in _help(capsys, "emit", "cpu")


def test_emit_of_a_target_without_source_is_one_line(capsys):
    assert main(["emit", "casgd", "anything"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no source to emit" in err


def test_arch_show_says_per_pe_and_total_macs(capsys):
    assert main(["arch", "show", "gemmini", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["macs_per_cycle"], doc["macs_per_cycle_per_pe"], doc["pes"]) == (256, 1, 256)
    assert doc["levels"][0]["instances"] == 1
    assert main(["arch", "show", "gemmini"]) == 0
    assert "256 MACs/cycle in total (256 PEs x 1 MAC/cycle per PE)" in capsys.readouterr().out


def test_bound_prints_tables_not_a_dict(capsys):
    assert main(["bound", "resnet50/res2a_branch2b", "--memory", "16KiB"]) == 0
    out = capsys.readouterr().out
    assert "{" not in out and "'" not in out
    assert "compulsory (binding)" in out and "fast memory of 16,384 B" in out
    assert main(["bound", "resnet50/res2a_branch2b", "--memory", "16KiB", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for dim, size in doc["tile"].items():  # every tile side is in the per-dimension table
        assert any(line.split("│")[1].strip() == dim and line.split("│")[3].strip() == f"{size:,}"
                   for line in out.splitlines() if line.count("│") == 5), dim
