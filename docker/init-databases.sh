#!/usr/bin/env bash
# Creates the two databases of the stack and their owners, each with its own password:
#   airflow    Airflow's metadata (user airflow, password AIRFLOW_DB_PASSWORD)
#   serialpub  serialpub's state, the statistics file (user serialpub, password SERIALPUB_DB_PASSWORD)
# The postgres image runs it once, from /docker-entrypoint-initdb.d/, when the data volume is
# empty; on an existing volume it does nothing (docker/README.md: changing passwords).
# Neither user can connect to the other's database.
# No `set -u` here: the postgres entrypoint sources this file when it is not executable.
set -e

: "${AIRFLOW_DB_PASSWORD:?AIRFLOW_DB_PASSWORD is not set}"
: "${SERIALPUB_DB_PASSWORD:?SERIALPUB_DB_PASSWORD is not set}"

psql -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname "${POSTGRES_DB:-postgres}" \
    --set=airflow_password="${AIRFLOW_DB_PASSWORD}" \
    --set=serialpub_password="${SERIALPUB_DB_PASSWORD}" <<'SQL'
CREATE ROLE airflow LOGIN PASSWORD :'airflow_password';
CREATE DATABASE airflow OWNER airflow;
REVOKE ALL ON DATABASE airflow FROM PUBLIC;
GRANT ALL ON DATABASE airflow TO airflow;

CREATE ROLE serialpub LOGIN PASSWORD :'serialpub_password';
CREATE DATABASE serialpub OWNER serialpub;
REVOKE ALL ON DATABASE serialpub FROM PUBLIC;
GRANT ALL ON DATABASE serialpub TO serialpub;
SQL
