"""The reproduction ledger: every quantitative claim of the project's sources (the LSB paper in
both versions, the flow paper, the block-proposal slides, the Monte Carlo chapter), each with its
status, the command that measures it and the figure we measured (``claims``); the table at the
top of ``docs/reproduction.md`` rendered from it and the generated sections' verdicts read back
(``document``); ``python -m lsbcore.studies ledger`` writes or checks it (``cli``)."""
