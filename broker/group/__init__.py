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

KIP-848 consumer groups (group.protocol=consumer):

    consumer_group.py         ConsumerGroup and ConsumerGroupMember: epochs, states, partition owners
    consumer_coordinator.py   ConsumerGroupHeartbeat, fencing, session/rebalance timeouts, offset checks
    reconciliation.py         a member's move towards its target: revoke first (CurrentAssignmentBuilder)
    assignors.py              the server-side assignors, uniform and range
    consumer_group_records.py the group's __consumer_offsets records, built and replayed
    consumer_offsets.py       offset expiry and OffsetDelete rules of a consumer group

Handlers live in broker/handlers/{find_coordinator,join_group,sync_group,heartbeat,leave_group,
offset_commit,offset_fetch,describe_groups,list_groups,delete_groups,offset_delete,
consumer_group_heartbeat,consumer_group_describe}.py; the
`samsa groups` commands in broker/cli/commands/groups.py.
"""
