"""A callback communicator for a world of one process, for tests without peers."""


class SoloCommunicator:
    """The callback communicator protocol for a world of one rank: every collective returns its
    input (wrap it in thdpack.CallbackCommunicator)."""

    rank, size, backend = 0, 1, "solo"

    def allgatherv(self, send, counts):
        return send

    def alltoallv(self, send, send_counts, recv_counts):
        return send

    def broadcast(self, data, root):
        return data

    def allreduce(self, data, op):
        return data

    def barrier(self):
        pass
