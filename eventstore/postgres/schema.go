package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrateLockKey is the pg_advisory_xact_lock key that serializes concurrent migrators: two
// `serve` processes starting at once must not race on CREATE ... IF NOT EXISTS (which is not
// safe against concurrent creation of the same object) or on CREATE OR REPLACE FUNCTION.
const migrateLockKey int64 = 0x5377_4576_5374_6f72 // "SwEvStor"

// SQLSTATEs raised by eventstore_append. Class "SW" is not used by PostgreSQL, so these codes
// cannot be confused with a server error.
const (
	// codeWrongExpectedVersion carries the stream's actual revision (-1: no stream) in DETAIL.
	codeWrongExpectedVersion = "SW001"
	// codeIdempotencyConflict: some event ids exist, but not as this append's events.
	codeIdempotencyConflict = "SW002"
	// codeRetry: the appending transaction's id is older than the stream's last writer's (see
	// the function body); a fresh transaction gets a newer id, so the caller retries.
	codeRetry = "SW003"
)

// The append lock: every transaction that writes events takes it, shared, before it has a
// transaction id, so subscriptions can tell appending transactions from the others
// (horizonSQL). Its key is (appendLockClass, slot): appenders spread over appendLockSlots slots
// so they do not all queue on one lock-manager partition.
const (
	appendLockClass    = 1398227280 // "SWAP"
	appendLockClassSQL = "1398227280"
	appendLockSlots    = 16
	appendLockSQL      = `SELECT pg_advisory_xact_lock_shared(` + appendLockClassSQL + `, $1::int)`
)

// codeMultiDeclined: eventstore_expect_written found that an append of an AppendMulti's fast
// path was declined; the transaction rolls back and the slow path decides.
const codeMultiDeclined = "SW005"

// codeClaimed: eventstore_claim found a key held by another owner; DETAIL is the key and the
// holder, in hex, separated by a colon.
const codeClaimed = "SW006"

// codeNoAppendLock: eventstore_append was called in a transaction that already had an id
// without holding the append lock; its events could be hidden from subscribers for ever.
const codeNoAppendLock = "SW004"

// Constraint names, so a unique violation can be told apart by what it protects.
const constraintEventID = "events_event_id_key"

// schemaSQL is the whole schema. Every statement is idempotent, so Migrate may run on every
// start.
//
// Why the columns are what they are:
//   - position is a plain identity: it orders events within a transaction and breaks ties,
//     but it is NOT the order of the log. Sequence values are handed out at insert time, not
//     at commit, so a transaction can commit a lower position after another committed a higher
//     one. The log is ordered by (tx_id, position) and readers only look below a horizon
//     under which every transaction that could write here has finished (the oldest running
//     holder of the append lock, horizonSQL): nothing can appear there later.
//   - tx_id is the 64-bit transaction id (xid8, never wraps), the primary key of the log order.
//   - category is stored so subscriptions filter in SQL without parsing stream names.
//   - data and metadata are json: stored as the text came, validated, never parsed into
//     jsonb's binary form nor printed back on every read (payload.go). The store refuses what a
//     reader could not take back before it writes (append.go, storable).
//   - streams holds one row per stream: appends lock it (and only it) to serialize writers of
//     one stream, so appends to different streams never wait for each other. Its tx_id is the
//     last writer's transaction id, used to keep revision order equal to log order.
//   - stream names (streams.name, events.stream) compare bytewise (COLLATE "C"), whatever the
//     database's locale: they are identifiers, not text for people, and every append walks
//     both indexes on them. Under a language locale each comparison went through the locale's
//     collation; with "C" an ICU en-US database's batched create took 8 to 15 % less time
//     (docs/performance.md, "Stream names compare bytewise"). Byte order is also Go's, so
//     the order the SQL locks streams in (eventstore_expect_at) is the order Go sorts them in.
//     Databases created before keep their collation (CREATE TABLE IF NOT EXISTS); converting
//     one rebuilds two indexes (docs/operations.md, "Stream names' collation").
const schemaSQL = `
CREATE TABLE IF NOT EXISTS events (
    position   bigint      GENERATED ALWAYS AS IDENTITY,
    stream     text        COLLATE "C" NOT NULL,
    revision   bigint      NOT NULL CHECK (revision >= 0),
    event_id   uuid        NOT NULL,
    type       text        NOT NULL,
    category   text        NOT NULL,
    data       json        NOT NULL,
    metadata   json,
    created_at timestamptz NOT NULL DEFAULT now(),
    tx_id      xid8        NOT NULL DEFAULT pg_current_xact_id(),
    -- The log order is the primary key: it is the index log reads walk, and a separate
    -- index on position alone would cost every append an index insert for no reader.
    CONSTRAINT events_pkey PRIMARY KEY (tx_id, position),
    CONSTRAINT events_event_id_key UNIQUE (event_id),
    CONSTRAINT events_stream_revision_key UNIQUE (stream, revision)
);

CREATE TABLE IF NOT EXISTS streams (
    name     text   COLLATE "C" PRIMARY KEY,
    revision bigint NOT NULL,
    tx_id    xid8   NOT NULL
);

-- eventstore_append appends events to one stream in one statement (one round trip), with
-- every rule of eventstore.Store.Append. Append first tries a cheaper plain statement that
-- handles the usual case (store.go, fastUpsertCTE) and falls back to this function.
-- It can also be called inside a caller's transaction (the tests do, to hold a commit back).
-- p_expected_kind: 0 any, 1 no stream, 2 stream exists, 3 exact (p_expected_rev).
-- Returns the stream's last revision after the append, the transaction id and the position of
-- the last event (both of the existing events on an idempotent repeat).
CREATE OR REPLACE FUNCTION eventstore_append(
    p_stream        text,
    p_expected_kind int,
    p_expected_rev  bigint,
    p_ids           uuid[],
    p_types         text[],
    p_data          jsonb[],
    p_metadata      jsonb[]
) RETURNS TABLE (o_revision bigint, o_commit xid8, o_position bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_n        int := coalesce(cardinality(p_ids), 0);
    v_cur      bigint;
    v_cur_tx   xid8;
    v_found    int;
    v_in_strm  int;
    v_base_min bigint;
    v_base_max bigint;
    v_my_tx    xid8;
    v_last_pos bigint;
    v_attempt  int := 0;
BEGIN
    IF coalesce(cardinality(p_types), 0) <> v_n
       OR coalesce(cardinality(p_data), 0) <> v_n
       OR coalesce(cardinality(p_metadata), 0) <> v_n THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'eventstore_append: ids, types, data and metadata differ in length';
    END IF;

    -- The append lock must be taken before the transaction has an id (see horizonSQL in
    -- store.go): a subscription could otherwise read past this transaction's id before its
    -- events appear, and never see them.
    IF pg_current_xact_id_if_assigned() IS NULL THEN
        PERFORM pg_advisory_xact_lock_shared(1398227280, 0);
    ELSIF NOT EXISTS (SELECT 1 FROM pg_locks l
                      WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid()
                        AND l.classid = 1398227280 AND l.objsubid = 2) THEN
        RAISE EXCEPTION USING ERRCODE = 'SW004',
            MESSAGE = 'eventstore_append: this transaction wrote before taking the append lock; append first, or take it first (SELECT pg_advisory_xact_lock_shared(1398227280, 0))';
    END IF;

    LOOP
        v_attempt := v_attempt + 1;

        -- The stream row lock serializes appends to this stream and nothing else.
        SELECT s.revision, s.tx_id INTO v_cur, v_cur_tx
        FROM streams s WHERE s.name = p_stream FOR UPDATE;
        IF NOT FOUND THEN
            v_cur := -1;
            v_cur_tx := NULL;
        END IF;

        -- Idempotency: a retried append finds its ids already stored. A new stream cannot hold
        -- them, and ids stored in another stream make the insert below fail on
        -- events_event_id_key, so the lookup is only needed for an existing stream.
        IF v_n > 0 AND v_cur >= 0 THEN
            SELECT count(*),
                   count(*) FILTER (WHERE e.stream = p_stream),
                   min(e.revision - (u.ord - 1)) FILTER (WHERE e.stream = p_stream),
                   max(e.revision - (u.ord - 1)) FILTER (WHERE e.stream = p_stream)
            INTO v_found, v_in_strm, v_base_min, v_base_max
            FROM unnest(p_ids) WITH ORDINALITY AS u(id, ord)
            JOIN events e ON e.event_id = u.id;

            IF v_found > 0 THEN
                -- A safe repeat: every id is in this stream, at consecutive revisions in the
                -- given order, starting where this append would have put the first one.
                IF v_found = v_n AND v_in_strm = v_n AND v_base_min = v_base_max
                   AND (p_expected_kind IN (0, 2)
                        OR (p_expected_kind = 1 AND v_base_min = 0)
                        OR (p_expected_kind = 3 AND v_base_min = p_expected_rev + 1)) THEN
                    RETURN QUERY
                        SELECT e.revision, e.tx_id, e.position FROM events e
                        WHERE e.stream = p_stream AND e.revision = v_base_min + v_n - 1;
                    RETURN;
                END IF;
                RAISE EXCEPTION USING ERRCODE = 'SW002',
                    MESSAGE = format('event ids already stored, but not as these events of %s', p_stream);
            END IF;
        END IF;

        IF (p_expected_kind = 1 AND v_cur <> -1)
           OR (p_expected_kind = 2 AND v_cur = -1)
           OR (p_expected_kind = 3 AND v_cur <> p_expected_rev) THEN
            RAISE EXCEPTION USING ERRCODE = 'SW001',
                MESSAGE = format('wrong expected version on %s', p_stream),
                DETAIL = v_cur::text;
        END IF;

        IF v_n = 0 THEN
            RETURN QUERY
                SELECT v_cur, e.tx_id, e.position FROM events e
                WHERE e.stream = p_stream AND e.revision = v_cur;
            IF NOT FOUND THEN
                RETURN QUERY SELECT v_cur, NULL::xid8, NULL::bigint;
            END IF;
            RETURN;
        END IF;

        v_my_tx := pg_current_xact_id();
        -- Keep a stream's revision order equal to its log order (tx_id, position). A
        -- transaction id is assigned when the transaction first writes or locks, which is not
        -- atomic with winning the stream lock: a writer could take its id, lose the lock race
        -- to a writer with a newer id, and then append the next revision with the older id,
        -- which the log would order first. That is rare (a microsecond window), so it is
        -- detected rather than prevented, and the caller retries in a new transaction. An
        -- equal id is the same transaction appending twice: position keeps the order.
        IF v_cur_tx IS NOT NULL AND v_my_tx < v_cur_tx THEN
            RAISE EXCEPTION USING ERRCODE = 'SW003',
                MESSAGE = format('transaction %s is older than the last writer of %s (%s); retry', v_my_tx, p_stream, v_cur_tx);
        END IF;

        IF v_cur = -1 THEN
            -- Creating the stream: a concurrent creator holds the unique index entry until it
            -- finishes, so DO NOTHING means someone else created it first; start over to lock
            -- their row and check the expectation against their events.
            INSERT INTO streams (name, revision, tx_id) VALUES (p_stream, v_n - 1, v_my_tx)
            ON CONFLICT (name) DO NOTHING;
            IF NOT FOUND THEN
                IF v_attempt >= 3 THEN
                    RAISE EXCEPTION USING ERRCODE = 'SW003',
                        MESSAGE = format('stream %s created concurrently; retry', p_stream);
                END IF;
                CONTINUE;
            END IF;
        ELSE
            UPDATE streams SET revision = v_cur + v_n, tx_id = v_my_tx WHERE name = p_stream;
        END IF;

        WITH ins AS (
            INSERT INTO events (stream, revision, event_id, type, category, data, metadata, tx_id)
            SELECT p_stream, v_cur + u.ord, u.id, u.typ, split_part(p_stream, '-', 1), u.dat, u.meta, v_my_tx
            FROM unnest(p_ids, p_types, p_data, p_metadata) WITH ORDINALITY AS u(id, typ, dat, meta, ord)
            ORDER BY u.ord
            RETURNING position
        )
        SELECT max(ins.position) INTO v_last_pos FROM ins;

        RETURN QUERY SELECT v_cur + v_n, v_my_tx, v_last_pos;
        RETURN;
    END LOOP;
END
$fn$;

-- eventstore_expect_written ends an AppendMulti's fast statements (multi.go): unless the
-- transaction has written exactly p_events events, one of its appends was declined, and it
-- raises SW005 so that the whole transaction, sent with its commit in one round trip, is
-- rolled back.
CREATE OR REPLACE FUNCTION eventstore_expect_written(p_events bigint) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    IF (SELECT count(*) FROM events WHERE tx_id = pg_current_xact_id()) <> p_events THEN
        RAISE EXCEPTION 'eventstore: an append of the multi-append was declined'
            USING ERRCODE = 'SW005';
    END IF;
END
$fn$;

-- eventstore_expect_at checks an AppendMulti's parts without events (multi.go): each stream
-- p_streams[i] must be at revision p_revs[i]. It locks their rows FOR SHARE, so no append to
-- them commits before this transaction ends: what was checked still holds at the commit. A
-- stream elsewhere raises SW005, and the slow path names it.
CREATE OR REPLACE FUNCTION eventstore_expect_at(p_streams text[], p_revs bigint[]) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    IF (SELECT count(*) FROM (
            SELECT 1 FROM streams s JOIN unnest(p_streams, p_revs) AS u(name, rev)
                ON s.name = u.name AND s.revision = u.rev
            ORDER BY s.name FOR SHARE OF s) l) <> cardinality(p_streams) THEN
        RAISE EXCEPTION 'eventstore: a check of the multi-append was declined'
            USING ERRCODE = 'SW005';
    END IF;
END
$fn$;
`

// claimsSQL is the claims' part of the schema, which MigrateClaims also runs on its own. The
// table is UNLOGGED: a claim is worthless minutes after it is taken (it guards a signature
// within its timestamp's skew window), and a crash, which empties the table, can only re-admit
// requests whose timestamps are about to leave that window anyway. eventstore_claim takes the
// keys in key order, so two transactions taking some of the same keys never deadlock; a key
// held by another owner and not yet lapsed raises SW006, which rolls back the whole
// transaction it is in, events and all.
const claimsSQL = `
CREATE UNLOGGED TABLE IF NOT EXISTS eventstore_claims (
    key        bytea PRIMARY KEY,
    owner      bytea NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS eventstore_claims_expires_at ON eventstore_claims (expires_at);

CREATE OR REPLACE FUNCTION eventstore_claim(p_keys bytea[], p_owners bytea[], p_untils timestamptz[], p_now timestamptz)
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
    v_taken bigint;
    v_key bytea;
    v_holder bytea;
BEGIN
    -- The keys are distinct (the caller's duty): each is inserted, taken over, or held.
    INSERT INTO eventstore_claims AS c (key, owner, expires_at)
    SELECT k, o, u FROM unnest(p_keys, p_owners, p_untils) AS t(k, o, u) ORDER BY k
    ON CONFLICT (key) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
        WHERE c.expires_at < p_now OR c.owner = EXCLUDED.owner;
    GET DIAGNOSTICS v_taken = ROW_COUNT;
    IF v_taken = cardinality(p_keys) THEN
        RETURN;
    END IF;
    SELECT t.k, c.owner INTO v_key, v_holder
    FROM unnest(p_keys, p_owners) AS t(k, o) JOIN eventstore_claims c ON c.key = t.k AND c.owner <> t.o
    LIMIT 1;
    RAISE EXCEPTION 'eventstore: a key is claimed by another owner'
        USING ERRCODE = 'SW006', DETAIL = encode(coalesce(v_key, ''::bytea), 'hex') || ':' || encode(coalesce(v_holder, ''::bytea), 'hex');
END
$fn$;
`

// MigrateClaims creates the claims table and function alone, for a replay guard on a database
// whose event log is elsewhere (KurrentDB). Migrate creates them too.
func MigrateClaims(ctx context.Context, pool *pgxpool.Pool) error {
	return migrate(ctx, pool, claimsSQL)
}

// ClaimsTable is the claims' table, which a replay guard on the same database shares, so that
// a signature taken on either path is taken for both.
const ClaimsTable = "eventstore_claims"

// Migrate creates or updates the event store schema. It is idempotent and safe to run from
// several processes at once: a transaction-scoped advisory lock lets one migrator work at a
// time, and the lock is released with the transaction even if the process dies.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return migrate(ctx, pool, schemaSQL+claimsSQL)
}

// StreamNamesBytewise reports whether the log's stream names compare bytewise (COLLATE "C"),
// as a log created by this version does. A log created before keeps the database's collation
// until an operator converts it (docs/operations.md, "Stream names' collation"), which migrate
// does not do: it would lock the log for two index rebuilds.
func StreamNamesBytewise(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	var n int
	err := pool.QueryRow(ctx, `
		SELECT count(*) FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation
		WHERE (a.attrelid, a.attname) IN (('streams'::regclass, 'name'), ('events'::regclass, 'stream'))
		  AND c.collname = 'C'`).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("eventstore/postgres: read the stream names' collation: %w", err)
	}
	return n == 2, nil
}

// PayloadsAsJSON reports whether the log keeps its events' data and metadata as json, as logs
// created since 11-28 do, rather than jsonb (payload.go); migrate leaves an older log as it is,
// because converting it rewrites the events table (docs/operations.md, "Payloads as json").
func PayloadsAsJSON(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	var typ *string
	if err := pool.QueryRow(ctx, payloadTypeSQL).Scan(&typ); err != nil {
		return false, fmt.Errorf("eventstore/postgres: read the payloads' type: %w", err)
	}
	return typ != nil && *typ == "json", nil
}

// migrate runs script under the migration lock.
func migrate(ctx context.Context, pool *pgxpool.Pool, script string) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("eventstore/postgres: migrate: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit; the migration error wins
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateLockKey); err != nil {
		return fmt.Errorf("eventstore/postgres: migrate: lock: %w", err)
	}
	// The simple protocol runs the multi-statement script in one round trip.
	if _, err := tx.Exec(ctx, script, pgx.QueryExecModeSimpleProtocol); err != nil {
		return fmt.Errorf("eventstore/postgres: migrate: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("eventstore/postgres: migrate: commit: %w", err)
	}
	return nil
}
