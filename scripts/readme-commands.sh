#!/usr/bin/env bash
# Prints the commands of a README's "## Two commands" section, one a line, as a user would type
# them: the first fenced block's lines, each without its trailing "# ..." comment. .ci/run runs
# exactly these, so the README cannot drift from what CI proves.
set -euo pipefail
awk '
	/^## / { in_section = ($0 == "## Two commands"); next }
	in_section && /^```/ { if (in_block) exit; in_block = 1; next }
	in_section && in_block {
		sub(/[ \t]+#.*$/, "")
		if ($0 != "") print
	}
' "${1:-README.md}"
