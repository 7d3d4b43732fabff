#!/usr/bin/env bash
# Prints every key path of a JSON file, one a line, arrays written as [] (docs/report-format.md's notation):
# json_keys.sh FILE
set -euo pipefail
jq -r '[paths(type != "object" and type != "array")]
       | map(map(if type == "number" then "[]" else . end) | join(".") | gsub("\\.\\[\\]"; "[]"))
       | unique | .[]' "$1"
