"""Reports: the result classes (``result``), schemas (``schemas``), gates (``gates``), comparison of two reports (``comparison``) and the HTML page (``html``)."""
