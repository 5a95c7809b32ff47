"""Fleet drift: run site.yml in check and diff mode, then report every host x
resource that differs, with waivers, history and peer comparison."""

from ._model import EXIT_CLEAN, EXIT_DRIFT, EXIT_FAILED, EXIT_UNREACHABLE, Report, load_report

__all__ = ["EXIT_CLEAN", "EXIT_DRIFT", "EXIT_FAILED", "EXIT_UNREACHABLE", "Report", "load_report"]
