-- durq schema v21 (PostgreSQL): a job's error history is bounded (defects item 2). It
-- keeps its first entry and its last 20 (durq.model.jobs.HISTORY_KEPT); older ones give
-- way to one marker entry, second in the history, of kind 'history_trimmed' whose
-- 'dropped' counts them. SQLite does the same in the statements that append (HISTORY in
-- store/sqlite/queries.py).
--
-- The fast path reads no JSON: it counts the entries by the text '{"attempt"' that starts
-- each of them (every writer puts 'attempt' first, and inside a JSON string a quote is
-- escaped, so the text cannot occur there) and appends as before while there are at most
-- 20. Only a history that is full is parsed (one that is not JSON is appended to as before).
-- append_error stays one SQL expression (the planner inlines it into the statement);
-- append_full, PL/pgSQL, runs only for a full history.
CREATE FUNCTION {schema}.append_full(errors text, entry text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    h json;
    n integer;
    marked integer;
    dropped bigint;
BEGIN
    BEGIN
        h := errors::json;
        n := json_array_length(h);
    EXCEPTION WHEN others THEN  -- not a JSON array: kept as it is
        RETURN left(errors, -1) || ',' || entry || ']';
    END;
    IF n <= 20 THEN
        RETURN left(errors, -1) || ',' || entry || ']';
    END IF;
    marked := CASE WHEN json_typeof(h -> 1) = 'object'
                        AND h -> 1 ->> 'kind' = 'history_trimmed' THEN 1 ELSE 0 END;
    dropped := CASE WHEN marked = 1 THEN coalesce((h -> 1 ->> 'dropped')::bigint, 0) ELSE 0 END
               + n - 1 - marked - 19;
    RETURN '[' || (h -> 0)::text || ','
        || json_build_object('attempt', 0, 'at', h -> 1 -> 'at', 'type', 'HistoryTrimmed',
                             'message', dropped || ' earlier entries not kept',
                             'traceback', '', 'kind', 'history_trimmed',
                             'dropped', dropped)::text
        || (SELECT ',' || string_agg(e::text, ',' ORDER BY i)
            FROM json_array_elements(h) WITH ORDINALITY AS t(e, i) WHERE i > n - 19)
        || ',' || entry || ']';
END $$;

CREATE OR REPLACE FUNCTION {schema}.append_error(errors text, entry text) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN errors IS NULL OR errors = '[]' THEN '[' || entry || ']'
                WHEN (octet_length(errors) - octet_length(replace(errors, '{"attempt"', ''))) / 10 <= 20
                THEN left(errors, -1) || ',' || entry || ']'
                ELSE {schema}.append_full(errors, entry) END $$;
