/* What every block driver shares: the init of a block that only needs the booted card, and the
 * event counters of any block (consecutive 32-bit registers, named in the devicetree). */
#include <errno.h>

#include <zephyr/arch/cpu.h>

#include "numavia/drivers.h"
#include "numavia_block.h"

static const struct numavia_block_config *block_config(const struct device *block)
{
    return block->config;
}

int numavia_block_init(const struct device *dev)
{
    ARG_UNUSED(dev);
    return device_is_ready(NUMAVIA_CARD_CONTROL_DEVICE) ? 0 : -ENODEV;
}

unsigned numavia_counter_count(const struct device *block)
{
    return block_config(block)->counter_count;
}

const char *numavia_counter_name(const struct device *block, unsigned index)
{
    const struct numavia_block_config *config = block_config(block);
    return index < config->counter_count ? config->counter_names[index] : NULL;
}

int numavia_counter_read(const struct device *block, unsigned index, uint32_t *value)
{
    const struct numavia_block_config *config = block_config(block);
    if (index >= config->counter_count || value == NULL)
        return -EINVAL;
    *value = sys_read32(config->base + config->counters_offset + 4 * index);
    return 0;
}
