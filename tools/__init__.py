"""Developer tools around the dashboard (not part of it): ``python -m tools.loadtest`` (several
browser sessions at once), ``python -m tools.measure`` (redraw cost against headless sampling)
and ``python -m tools.screenshots`` (the README's screenshots); ``tools.browser_kit`` is what
they and the end-to-end tests share to drive the app in a browser."""
