-- Makes :'release' the live release of :'name', unless a deploy with a newer fencing token got there
-- first. One statement, so the check and the write are atomic: the first deploy inserts the row,
-- later ones update it only WHERE the stored token is not newer than theirs (an equal token is the
-- same lease grant retrying its own write). It prints 1 when it wrote and nothing when it refused.
-- Run by deploy-sql.sh with psql variables name, release and token.
INSERT INTO live_release (name, release, token)
VALUES (:'name', :'release', :token)
ON CONFLICT (name) DO UPDATE
  SET release = EXCLUDED.release, token = EXCLUDED.token
  WHERE live_release.token <= EXCLUDED.token
RETURNING 1;
