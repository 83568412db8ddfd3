-- 0006_token_nodes.sql: agent tokens name the nodes they may act as.
--
-- A row is a node name ("n1") or a name prefix followed by "*" ("gpu-*";
-- "*" alone: any node). An agent token with rows may register, read the
-- desired state of, report for and ship output of matching nodes only;
-- one without rows (every agent token made before this migration) acts
-- for any node, as before. Names, not node ids: a token is made before
-- its node first registers.
CREATE TABLE api_token_node (
    token_id     bigint NOT NULL,
    node_pattern text NOT NULL,
    CONSTRAINT api_token_node_pkey PRIMARY KEY (token_id, node_pattern),
    CONSTRAINT api_token_node_token_fkey FOREIGN KEY (token_id)
        REFERENCES api_token (id) ON DELETE CASCADE,
    CONSTRAINT api_token_node_pattern_check
        CHECK (node_pattern ~ '^([a-z0-9][a-z0-9-]{0,62}|[a-z0-9][a-z0-9-]{0,61}\*|\*)$')
);
