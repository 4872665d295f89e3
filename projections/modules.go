package projections

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/domain/billing"
	"github.com/switchyard/switchyard/domain/module"
	"github.com/switchyard/switchyard/eventstore"
)

// Modules projects workspace modules (issue 28), for listing them. Submits and single GETs do
// not read this table: they fold the module's stream, so a module is usable the instant its
// registration is acknowledged and refused the instant its deletion is. The table holds no
// secret, sealed or not: only whether there is one.
type Modules struct{}

// Name implements Projector.
func (Modules) Name() string { return "modules" }

// Tables implements Projector.
func (Modules) Tables() []string { return []string{"modules"} }

// Filter implements Projector.
func (Modules) Filter() eventstore.Filter {
	return eventstore.Filter{Types: typesOf(module.Registered{}, module.Updated{}, module.Deleted{})}
}

// Migrate implements Projector.
func (Modules) Migrate(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `
	CREATE TABLE IF NOT EXISTS modules (
		workspace_id   text NOT NULL,
		name           text NOT NULL,
		description    text NOT NULL,
		input_schema   text,
		config_schema  text,
		output_schema  text,
		timeout_ms     bigint NOT NULL,
		price_milli    bigint NOT NULL,
		cacheable      boolean NOT NULL,
		concurrency    integer NOT NULL,
		transport_type text NOT NULL,
		url            text NOT NULL,
		allow_private  boolean NOT NULL,
		signed         boolean NOT NULL,
		version        integer NOT NULL,
		created_at     timestamptz NOT NULL,
		updated_at     timestamptz NOT NULL,
		PRIMARY KEY (workspace_id, name)
	);`)
	return err
}

// Apply implements Projector. Every value comes from the event, so a rebuild reproduces the rows.
func (Modules) Apply(ctx context.Context, tx *Tx, ev eventstore.RecordedEvent) error {
	e, err := decode(ev)
	if err != nil {
		return err
	}
	switch e := e.(type) {
	case module.Registered:
		s := e.Spec
		// A name registered again after a delete is a new module: version 1 (its row was
		// deleted with the old one).
		tx.Exec(`INSERT INTO modules (workspace_id, name, description, input_schema, config_schema, output_schema,
			timeout_ms, price_milli, cacheable, concurrency, transport_type, url, allow_private, signed, version, created_at, updated_at)
			VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,1,$15,$15)
			ON CONFLICT (workspace_id, name) DO NOTHING`,
			e.WorkspaceID, e.Name, s.Description, schemaText(s.InputSchema), schemaText(s.ConfigSchema), schemaText(s.OutputSchema),
			s.TimeoutMs, int64(s.Price), s.Cacheable, s.Concurrency, s.Transport.Type, s.Transport.URL, s.Transport.AllowPrivate,
			s.Transport.SealedSecret != "", e.At)
	case module.Updated:
		s := e.Spec
		tx.Exec(`UPDATE modules SET description = $3, input_schema = $4, config_schema = $5, output_schema = $6,
			timeout_ms = $7, price_milli = $8, cacheable = $9, concurrency = $10, transport_type = $11, url = $12,
			allow_private = $13, signed = $14, version = version + 1, updated_at = $15
			WHERE workspace_id = $1 AND name = $2`,
			e.WorkspaceID, e.Name, s.Description, schemaText(s.InputSchema), schemaText(s.ConfigSchema), schemaText(s.OutputSchema),
			s.TimeoutMs, int64(s.Price), s.Cacheable, s.Concurrency, s.Transport.Type, s.Transport.URL, s.Transport.AllowPrivate,
			s.Transport.SealedSecret != "", e.At)
	case module.Deleted:
		tx.Exec(`DELETE FROM modules WHERE workspace_id = $1 AND name = $2`, e.WorkspaceID, e.Name)
	}
	return nil
}

func schemaText(doc json.RawMessage) *string {
	if len(doc) == 0 {
		return nil
	}
	s := string(doc)
	return &s
}

// ModuleRow is a workspace module as the API shows it: never its secret, only whether it
// has one (transport.signed).
type ModuleRow struct {
	WorkspaceID  string          `json:"workspaceId"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	ConfigSchema json.RawMessage `json:"configSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
	TimeoutMs    int64           `json:"timeoutMs"`
	Price        billing.Credits `json:"price"`
	Cacheable    bool            `json:"cacheable"`
	Concurrency  int             `json:"concurrency"`
	Transport    ModuleTransport `json:"transport"`
	Version      int             `json:"version"`
	CreatedAt    time.Time       `json:"createdAt"`
	UpdatedAt    time.Time       `json:"updatedAt"`
}

// ModuleTransport is a module's transport without its secret.
type ModuleTransport struct {
	Type         string `json:"type"`
	URL          string `json:"url,omitempty"`
	AllowPrivate bool   `json:"allowPrivate"`
	// Signed says requests are signed with the module's secret (which is never shown).
	Signed bool `json:"signed"`
}

// ModuleView is m as the API shows it (a single GET folds the stream; lists read the table).
func ModuleView(m module.Module) ModuleRow {
	t := m.Transport
	return ModuleRow{
		WorkspaceID: m.WorkspaceID, Name: m.Name, Description: m.Description,
		InputSchema: nullIfEmpty(m.InputSchema), ConfigSchema: nullIfEmpty(m.ConfigSchema), OutputSchema: nullIfEmpty(m.OutputSchema),
		TimeoutMs: m.TimeoutMs, Price: m.Price, Cacheable: m.Cacheable, Concurrency: m.Concurrency,
		Transport: ModuleTransport{Type: t.Type, URL: t.URL, AllowPrivate: t.AllowPrivate, Signed: m.Signed()},
		Version:   m.Version, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt,
	}
}

func nullIfEmpty(doc json.RawMessage) json.RawMessage {
	if len(doc) == 0 {
		return json.RawMessage("null")
	}
	return doc
}

// ModulesOf lists a page of a workspace's modules by name, and the total.
func (q *Queries) ModulesOf(ctx context.Context, workspaceID string, p Page) ([]ModuleRow, int, error) {
	return q.ModulesFrom(ctx, workspaceID, p.Offset(), p.Limit)
}

// ModulesFrom lists up to limit of a workspace's modules by name from offset, and the total:
// for lists that put other entries before them (the SDK's listing puts the built-ins first).
func (q *Queries) ModulesFrom(ctx context.Context, workspaceID string, offset, limit int) ([]ModuleRow, int, error) {
	var total int
	if err := q.db.QueryRow(ctx, `SELECT count(*) FROM modules WHERE workspace_id = $1`, workspaceID).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count modules: %w", err)
	}
	list := []ModuleRow{}
	if limit <= 0 {
		return list, total, nil
	}
	rows, err := q.db.Query(ctx, `SELECT workspace_id, name, description, input_schema, config_schema, output_schema,
		timeout_ms, price_milli, cacheable, concurrency, transport_type, url, allow_private, signed, version, created_at, updated_at
		FROM modules WHERE workspace_id = $1 ORDER BY name LIMIT $2 OFFSET $3`, workspaceID, limit, offset)
	if err != nil {
		return nil, 0, fmt.Errorf("list modules: %w", err)
	}
	list, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (ModuleRow, error) {
		var m ModuleRow
		var in, cfg, out *string
		var price int64
		err := r.Scan(&m.WorkspaceID, &m.Name, &m.Description, &in, &cfg, &out, &m.TimeoutMs, &price, &m.Cacheable,
			&m.Concurrency, &m.Transport.Type, &m.Transport.URL, &m.Transport.AllowPrivate, &m.Transport.Signed,
			&m.Version, &m.CreatedAt, &m.UpdatedAt)
		m.Price = billing.Credits(price)
		m.InputSchema, m.ConfigSchema, m.OutputSchema = rawOrNull(in), rawOrNull(cfg), rawOrNull(out)
		return m, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list modules: %w", err)
	}
	if list == nil {
		list = []ModuleRow{}
	}
	return list, total, nil
}

func rawOrNull(s *string) json.RawMessage {
	if s == nil {
		return json.RawMessage("null")
	}
	return json.RawMessage(*s)
}
