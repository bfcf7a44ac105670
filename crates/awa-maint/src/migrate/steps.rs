//! The numbered migrations, frozen as released.
//!
//! Each step is a file in `crates/awa-maint/migrations/`, named
//! `NNNN_description.sql`, applied once, in order, in a transaction of its
//! own. A released step is never edited (its checksum is recorded in
//! `awa.schema_version` and a test compares the file with the list here);
//! a change to the schema is a new step. `cargo xtask migration draft`
//! writes the parts of the next step that can be derived from the sources
//! (changed functions and templates, the refresh of every substrate); the
//! rest (altering existing tables) is written by hand, and
//! `tests/maint/upgrade.rs` proves that version 1 brought up through every step
//! equals a fresh install of the current sources.

/// `(version, description, text)`, oldest first; versions are 1, 2, 3, ...
pub(crate) const STEPS: &[(i32, &str, &str)] = &[
    (
        1,
        "queue storage substrate",
        include_str!("../../migrations/0001_queue_storage_substrate.sql"),
    ),
    (
        2,
        "edges uniqueness attempt history priority activity",
        include_str!(
            "../../migrations/0002_edges_uniqueness_attempt_history_priority_activity.sql"
        ),
    ),
    (
        3,
        "claim reads the newest queue slots lane heads low generation",
        include_str!(
            "../../migrations/0003_claim_reads_the_newest_queue_slots_lane_heads_low_generation.sql"
        ),
    ),
    (
        4,
        "rate limits global concurrency trace context producer",
        include_str!(
            "../../migrations/0004_rate_limits_global_concurrency_trace_context_producer.sql"
        ),
    ),
    (
        5,
        "claim skips tombstoned entries and moves an exhausted lane head to the frontier",
        include_str!(
            "../../migrations/0005_claim_skips_tombstoned_entries_and_moves_an_exhausted_lane_head_to_the_frontier.sql"
        ),
    ),
    (
        6,
        "a rotator losing a race in the ledger chain check reports lost race",
        include_str!(
            "../../migrations/0006_a_rotator_losing_a_race_in_the_ledger_chain_check_reports_lost_race.sql"
        ),
    ),
    (
        7,
        "storage transfer moves both tables with one statement",
        include_str!(
            "../../migrations/0007_storage_transfer_moves_both_tables_with_one_statement.sql"
        ),
    ),
    (
        8,
        "claims of one queue queue up for its lanes and a claim that skips a held lane says to look again",
        include_str!(
            "../../migrations/0008_claims_of_one_queue_queue_up_for_its_lanes_and_a_claim_that_skips_a_held_lane_says_to_look_again.sql"
        ),
    ),
    (
        9,
        "ready take counts the lanes in the statement that reads them before locking",
        include_str!(
            "../../migrations/0009_ready_take_counts_the_lanes_in_the_statement_that_reads_them_before_locking.sql"
        ),
    ),
    (
        10,
        "lane reads walk in order whatever the statistics and prune seals before it writes",
        include_str!(
            "../../migrations/0010_lane_reads_walk_in_order_whatever_the_statistics_and_prune_seals_before_it_writes.sql"
        ),
    ),
    (
        11,
        "claims probe tombstones per entry and relocation resumes in a sealed slot",
        include_str!(
            "../../migrations/0011_claims_probe_tombstones_per_entry_and_relocation_resumes_in_a_sealed_slot.sql"
        ),
    ),
    (
        12,
        "a set based lean finish and claims planned without jit",
        include_str!(
            "../../migrations/0012_a_set_based_lean_finish_and_claims_planned_without_jit.sql"
        ),
    ),
    (
        13,
        "claims write their batch in one statement",
        include_str!("../../migrations/0013_claims_write_their_batch_in_one_statement.sql"),
    ),
    (
        14,
        "status reads price the live work not the history kept",
        include_str!(
            "../../migrations/0014_status_reads_price_the_live_work_not_the_history_kept.sql"
        ),
    ),
    (
        15,
        "finish reads batch arrays once claims skip absent tombstones and ring arrays compress with lz4",
        include_str!(
            "../../migrations/0015_finish_reads_batch_arrays_once_claims_skip_absent_tombstones_and_ring_arrays_compress_with_lz4.sql"
        ),
    ),
    (
        16,
        "open batch items skip batches their links closed",
        include_str!("../../migrations/0016_open_batch_items_skip_batches_their_links_closed.sql"),
    ),
    (
        17,
        "claim batches are read whole through one function",
        include_str!("../../migrations/0017_claim_batches_are_read_whole_through_one_function.sql"),
    ),
    (
        18,
        "status reads probe tombstones only when some exist",
        include_str!(
            "../../migrations/0018_status_reads_probe_tombstones_only_when_some_exist.sql"
        ),
    ),
    (
        19,
        "unique keys of a window are kept a minute past it",
        include_str!("../../migrations/0019_unique_keys_of_a_window_are_kept_a_minute_past_it.sql"),
    ),
    (
        20,
        "the claim takes one lane in one statement",
        include_str!("../../migrations/0020_the_claim_takes_one_lane_in_one_statement.sql"),
    ),
    (
        21,
        "the finish of one claim batch sorts nothing",
        include_str!("../../migrations/0021_the_finish_of_one_claim_batch_sorts_nothing.sql"),
    ),
    (
        22,
        "stored times are bounded and every reader shows whatever a table holds",
        include_str!(
            "../../migrations/0022_stored_times_are_bounded_and_every_reader_shows_whatever_a_table_holds.sql"
        ),
    ),
];
