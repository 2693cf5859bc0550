//! Migration 8: the CHECK constraints on `verifications.status` and
//! `webhook_deliveries.state` written as equalities joined by `OR` instead
//! of `IN` lists: the same rule, the same rows accepted and refused, at a
//! fraction of the cost.
//!
//! Why: SQLite checks `x IN (list)` of more than two constants against a
//! temporary b-tree of the list (`OpenEphemeral`: a b-tree, a pager and a
//! page cache, with their allocations), built again at every execution of
//! the statement. Every create, every call's completion and its outbox row,
//! every expiry and every delivery's change of state built one in the
//! writer, the one thread all of them queue for: about two thirds of the
//! writer's allocations per create. An `OR` of equalities is a few
//! comparisons. (Lists of one or two constants, `pool` and `livemode`,
//! SQLite already compiles to comparisons.)
//!
//! How: SQLite cannot alter a CHECK in place, and rebuilding the tables
//! would copy every row. Replacing a CHECK with an equivalent one is what
//! SQLite's documentation ("Making Other Kinds Of Table Schema Changes" in
//! its ALTER TABLE page) allows by editing the table's definition in
//! `sqlite_schema` with `writable_schema` on, then raising `schema_version`
//! so that other connections read the definitions again (and `RESET`
//! makes this one do so). The new text accepts exactly the rows the old
//! one did, so no stored row can break it, and the edit is a few bytes
//! whatever the size of the file. A definition that does not hold the old
//! text (not written by these migrations) is left as it is: still
//! correct, only slower.
//!
//! Kept apart from `schema` so that its number can change at a merge
//! without touching the step.
//!
//! Not for: any other change of a table; those rebuild or `ALTER` it.

use crate::error::Result;
use rusqlite::{params, Connection};

/// (table, its CHECK as migration 1 wrote it, the same rule as equalities).
const REWRITES: [(&str, &str, &str); 2] = [
    (
        "verifications",
        "CHECK (status IN ('pending', 'completed', 'expired', 'failed'))",
        "CHECK (status = 'pending' OR status = 'completed' OR status = 'expired' \
         OR status = 'failed')",
    ),
    (
        "webhook_deliveries",
        "CHECK (state IN ('pending', 'delivered', 'dead'))",
        "CHECK (state = 'pending' OR state = 'delivered' OR state = 'dead')",
    ),
];

/// The migration's step, inside the upgrade's transaction.
pub(crate) fn apply(conn: &Connection) -> Result<()> {
    let version: i64 = conn.pragma_query_value(None, "schema_version", |r| r.get(0))?;
    conn.pragma_update(None, "writable_schema", true)?;
    let rewritten = rewrite(conn).and_then(|count| {
        if count > 0 {
            // Raised, so that other connections re-read the definitions.
            conn.pragma_update(None, "schema_version", version + 1)?;
        }
        Ok(())
    });
    // Off again whatever happened, and (RESET) this connection re-reads the
    // definitions too: it goes on to serve, as the writer.
    conn.pragma_update(None, "writable_schema", "RESET")?;
    rewritten
}

/// Replaces each old CHECK text where it is found; how many definitions
/// changed.
fn rewrite(conn: &Connection) -> Result<usize> {
    let mut changed = 0;
    for (table, old, new) in REWRITES {
        changed += conn.execute(
            "UPDATE sqlite_schema SET sql = replace(sql, ?2, ?3) \
             WHERE type = 'table' AND name = ?1 AND instr(sql, ?2) > 0",
            params![table, old, new],
        )?;
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Migration, MIGRATIONS};
    use rusqlite::types::Null;

    /// A connection at schema version 7, the last before this migration.
    fn at_version_7() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        for migration in &MIGRATIONS[..7] {
            let Migration::Sql(statements) = migration else {
                panic!("migrations 1-7 are statements");
            };
            for sql in *statements {
                conn.execute_batch(sql).unwrap();
            }
        }
        conn.pragma_update(None, "user_version", 7).unwrap();
        // What the verifications written below refer to.
        conn.execute_batch(
            "INSERT INTO companies (id, name, created_at, webhook_secret) VALUES (1, 'c', 0, 's');
             INSERT INTO api_keys (id, company_id, label, prefix, secret_hash, created_at)
             VALUES (1, 1, 'k', 'p', 'h', 0);",
        )
        .unwrap();
        conn
    }

    fn definition(conn: &Connection, table: &str) -> String {
        conn.query_row(
            "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1",
            [table],
            |r| r.get(0),
        )
        .unwrap()
    }

    /// Statements the writer runs for a create, a completion, its outbox
    /// row and a delivery, by their effect on the two columns.
    const WRITES: [&str; 4] = [
        "INSERT INTO verifications (id, company_id, api_key_id, phone, dial_number, pool, \
         webhook_url, ttl_seconds, status, created_at, expires_at, lease_generation) \
         VALUES (?1, 1, 1, '+1', '+2', 'domestic', 'u', 60, ?2, 0, 60000, 0)",
        "UPDATE verifications SET status = ?2 WHERE id = ?1",
        "INSERT INTO webhook_deliveries (verification_id, company_id, event_type, url, \
         payload, state, created_at, updated_at) VALUES (?1, 1, 'e', 'u', '{}', ?2, 0, 0)",
        "UPDATE webhook_deliveries SET state = ?2 WHERE verification_id = ?1",
    ];

    fn ephemeral_tables(conn: &Connection, sql: &str) -> usize {
        let mut stmt = conn.prepare(&format!("EXPLAIN {sql}")).unwrap();
        let ops: Vec<String> = stmt
            .query_map(params![Null, Null], |r| r.get::<_, String>(1))
            .unwrap()
            .map(|op| op.unwrap())
            .collect();
        ops.iter().filter(|op| *op == "OpenEphemeral").count()
    }

    #[test]
    fn the_writes_no_longer_build_a_temporary_b_tree_on_the_migrating_connection() {
        let conn = at_version_7();
        assert_eq!(
            ephemeral_tables(&conn, WRITES[0]),
            1,
            "before: the IN list of four statuses is checked against a temporary b-tree \
             (if SQLite stopped doing that, this migration has become unnecessary)"
        );
        let before: i64 = conn
            .pragma_query_value(None, "schema_version", |r| r.get(0))
            .unwrap();
        // As a start does it: every missing migration in one transaction.
        crate::schema::migrate(&conn).unwrap();
        for sql in WRITES {
            assert_eq!(
                ephemeral_tables(&conn, sql),
                0,
                "design choice: the status CHECKs are equalities joined by OR, so the \
                 writer's statements build no temporary b-tree: {sql}"
            );
        }
        let after: i64 = conn
            .pragma_query_value(None, "schema_version", |r| r.get(0))
            .unwrap();
        assert_eq!(
            after,
            before + 1,
            "other connections must re-read the schema"
        );
        let writable: i64 = conn
            .pragma_query_value(None, "writable_schema", |r| r.get(0))
            .unwrap();
        assert_eq!(writable, 0, "writable_schema is off again");
        for (table, old, new) in REWRITES {
            let sql = definition(&conn, table);
            assert!(sql.contains(new) && !sql.contains(old), "{table}: {sql}");
        }
    }

    #[test]
    fn the_same_statuses_are_accepted_and_refused_and_stored_rows_stay() {
        let conn = at_version_7();
        conn.execute(WRITES[0], params!["v_old", "pending"])
            .unwrap();
        apply(&conn).unwrap();
        let check: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
        let stored: String = conn
            .query_row(
                "SELECT status FROM verifications WHERE id = 'v_old'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(
            stored, "pending",
            "a row written before the migration stays"
        );
        for status in ["pending", "completed", "expired", "failed"] {
            conn.execute(WRITES[1], params!["v_old", status])
                .unwrap_or_else(|e| panic!("status {status} must be accepted: {e}"));
        }
        conn.execute(WRITES[2], params!["v_old", "pending"])
            .unwrap();
        for state in ["delivered", "dead", "pending"] {
            conn.execute(WRITES[3], params!["v_old", state])
                .unwrap_or_else(|e| panic!("state {state} must be accepted: {e}"));
        }
        for (sql, id, bad) in [
            (WRITES[0], "v_new", "Pending"),
            (WRITES[1], "v_old", "cancelled"),
            (WRITES[2], "v_new", "sent"),
            (WRITES[3], "v_old", "failed"),
        ] {
            let refused = conn
                .execute(sql, params![id, bad])
                .expect_err("a status outside the list is refused");
            assert!(
                refused.to_string().contains("CHECK constraint failed"),
                "{bad}: {refused}"
            );
        }
    }

    #[test]
    fn a_definition_without_the_old_text_is_left_as_it_is() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE verifications (status TEXT CHECK (status IN ('a', 'b', 'c')));
             CREATE TABLE webhook_deliveries (state TEXT);",
        )
        .unwrap();
        let before = definition(&conn, "verifications");
        let version: i64 = conn
            .pragma_query_value(None, "schema_version", |r| r.get(0))
            .unwrap();
        apply(&conn).unwrap();
        assert_eq!(definition(&conn, "verifications"), before);
        let after: i64 = conn
            .pragma_query_value(None, "schema_version", |r| r.get(0))
            .unwrap();
        assert_eq!(after, version, "nothing changed, nothing to re-read");
    }
}
