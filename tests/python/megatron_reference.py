"""Megatron-LM's DpBalancedScheduler packing, written from its description, for tests that check
thdpack's plans against Megatron's: next-fit in the given order with capacity C, then, while the
pack count is not a multiple of `multiple` (dp x VPP group), walking back from the last pack, the
last entry of the nearest pack holding more than one becomes a new pack at the end."""


def megatron_dp_balanced(lengths, capacity, multiple):
    """Packs as lists of positions into `lengths`."""
    packs, total = [], 0
    for i, length in enumerate(lengths):
        if packs and total + length <= capacity:
            packs[-1].append(i)
            total += length
        else:
            packs.append([i])
            total = length
    missing = (multiple - len(packs) % multiple) % multiple
    i = len(packs) - 1
    while missing:
        if len(packs[i]) > 1:
            packs.append([packs[i].pop()])
            missing -= 1
        else:
            i -= 1
    return packs
