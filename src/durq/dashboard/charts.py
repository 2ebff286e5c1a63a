"""Server-side SVG: throughput and failures per minute as two polylines, no script."""

from __future__ import annotations

from markupsafe import Markup, escape


def sparkline(
    succeeded: list[int], failed: list[int], width: int = 180, height: int = 40
) -> Markup:
    """An SVG with one line for succeeded and one for failed jobs per bucket (oldest left).

    Numbers only reach the SVG; the title is escaped. Returns markup ready for a template.
    """
    n = max(len(succeeded), len(failed), 1)
    top = max([*succeeded, *failed, 1])
    step = width / max(n - 1, 1)

    def points(values: list[int]) -> str:
        return " ".join(
            f"{i * step:.1f},{height - 2 - (v / top) * (height - 4):.1f}"
            for i, v in enumerate(values)
        )

    total_ok, total_failed = sum(succeeded), sum(failed)
    title = escape(f"last hour: {total_ok} succeeded, {total_failed} failed (peak {top}/min)")
    return Markup(
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" xmlns="http://www.w3.org/2000/svg"><title>{title}</title>'
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#f6f7f9"/>'
        f'<polyline fill="none" stroke="#2e7d32" stroke-width="1.5" points="{points(succeeded)}"/>'
        f'<polyline fill="none" stroke="#c62828" stroke-width="1.5" points="{points(failed)}"/>'
        "</svg>"
    )
