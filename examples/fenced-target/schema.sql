-- The table a deploy fences on: one row per service, the live release and the fencing token of the
-- deploy that made it live. Create it once.
CREATE TABLE IF NOT EXISTS live_release (
  name    text   PRIMARY KEY,
  release text   NOT NULL,
  token   bigint NOT NULL
);
