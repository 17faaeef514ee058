"""Consumer groups: the classic group coordinator (pure) and its `__consumer_offsets` shell.

    state.py              GroupState, GroupEvent and the (state, event) -> state table (Kafka's ClassicGroupState)
    classic_group.py      Group and Member (Kafka's ClassicGroup), the values the coordinator answers with
    offsets.py            validate/commit/delete/expire a group's offsets (Kafka's OffsetMetadataManager)
    coordinator.py        GroupCoordinator: join/sync/heartbeat/leave, fencing, static membership,
                          timers, offsets, expiry -- a pure state machine driven with now_ms
    records.py            Kafka's __consumer_offsets key/value formats (+ Samsa's reset audit records)
    batches.py            the record batches the coordinator appends and replays
    consumer_protocol.py  reading consumer subscriptions/assignments (OffsetDelete, expiry, tools)
    service.py            the shell: creates/appends/replays __consumer_offsets, runs the timers

Handlers live in broker/handlers/{find_coordinator,join_group,sync_group,heartbeat,leave_group,
offset_commit,offset_fetch,describe_groups,list_groups,delete_groups,offset_delete}.py; the
`samsa groups` commands in broker/cli/commands/groups.py.
"""
