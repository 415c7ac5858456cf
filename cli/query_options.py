"""The flags that describe a query, shared by `kbsolve` and `kbsolve estimate`."""

from __future__ import annotations

import functools

import click

from kbsolve.cli.plain import FORMATS, query_fields  # noqa: F401 - estimate's and the command's


def query_options(fn):
    options = [
        click.option("--gpus", "-g", help="COUNTxGPU or NODESxCOUNTxGPU, e.g. 8xA100, 2x8xH100; "
                                          "COUNTxMEMORY (2x16GB) for a card the catalog lacks."),
        click.option("--gpu-spec", "gpu_spec", type=click.Path(dir_okay=False), default=None,
                     metavar="FILE.yaml", help="A GPU the catalog lacks, as a YAML of the "
                     "catalog's GPU fields (unstated ones are assumed, and said); --gpus "
                     "then gives the count [default: 1]."),
        click.option("--model", "-m", help="Catalog name or alias, a config.json, or a YAML spec."),
        click.option("--framework", "-f", default=None, help="Override the framework."),
        click.option("--task", "-t", default=None, help="Stage or trainer (sft, dpo, grpo, ...)."),
        click.option("--network", default=None, help="Inter-node network (ib-400, roce-200, ...)."),
        click.option("--seq-len", type=click.IntRange(min=1), default=None,
                     help="Sequence length in tokens."),
        click.option("--resolution", default=None, help="HxW, e.g. 480x832."),
        click.option("--frames", type=click.IntRange(min=1), default=None, help="Video frames."),
        click.option("--global-batch", type=click.IntRange(min=1), default=None, metavar="N",
                     help="The recipe's global batch (sequences per step for LLMs, prompts "
                          "per epoch for Flow-Factory) [default: the framework's, in kb/]."),
        click.option("--set", "pins", multiple=True, metavar="KEY=VALUE",
                     help="Pin an option (repeatable)."),
        click.option("--headroom", type=float, default=None,
                     help="Fraction of GPU memory kept free [default: query.headroom_pct "
                          "of the KB, in kb/core/vocabulary.kb]."),
        click.option("--host-ram", type=click.FloatRange(min=0, min_open=True), default=None,
                     metavar="GIB", help="CPU RAM per node; offloading plans must fit it."),
        click.option("--format", "fmt", type=click.Choice(FORMATS), default="table",
                     show_default=True),
        click.option("--kb", "packs", multiple=True, type=click.Path(),
                     help="A rule pack laid over the shipped KB (repeatable)."),
    ]
    return functools.reduce(lambda f, option: option(f), reversed(options), fn)
