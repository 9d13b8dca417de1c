#!/usr/bin/env bash
# A deploy step for a target whose state is a row of PostgreSQL: records RELEASE as NAME's live
# release, fenced by the token `latestwins run` gives the deploy (see fence.sql).
#
#   latestwins run --environment prod --scopes api -- examples/fenced-target/deploy-sql.sh api v42
#
# Needs psql and DATABASE_URL (a libpq connection string), and the table of schema.sql.
# Exit 0: written. Exit 3: refused, a newer deploy holds the target; nothing was written.
set -euo pipefail
name="${1:?usage: deploy-sql.sh NAME RELEASE}"
release="${2:?usage: deploy-sql.sh NAME RELEASE}"
token="${LATESTWINS_FENCING_TOKEN:?run under latestwins run, which sets LATESTWINS_FENCING_TOKEN}"
# The token is put into the statement as a number: accept nothing but digits.
if [[ ! "$token" =~ ^[0-9]+$ ]]; then
  echo "deploy-sql: LATESTWINS_FENCING_TOKEN=$token is not a number" >&2
  exit 2
fi
written=$(psql "${DATABASE_URL:?set DATABASE_URL}" -X -q -t -A -v ON_ERROR_STOP=1 \
  -v name="$name" -v release="$release" -v token="$token" -f "$(dirname "$0")/fence.sql")
if [ "$written" != 1 ]; then
  echo "deploy-sql: refused: a deploy with a newer fencing token than $token already set $name" >&2
  exit 3
fi
echo "deploy-sql: $name is $release (fencing token $token)"
