/**
 * What the plugin advertises to kubelet (wire contract §5 first bullet): `count` replicas per GPU,
 * with IDs `<UUID>-<i>`, read back from the inventory it registers on the node (§4.2: the JSON form
 * of v2.8+, or the legacy `:`-terminated form). Unhealthy GPUs are not advertised. Pure.
 */
export interface RegisteredGpu {
  uuid: string;
  count: number;
  healthy: boolean;
  /**
   * `devmem`: MiB after the plugin's memory scaling, what HAMi's plugin reports of its own card
   * (registeredMemoryMB) when #3075 sizes a percentage request; 0 when omitted.
   */
  memoryMiB: number;
}

export class InventoryFormatError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'InventoryFormatError';
  }
}

function fromJson(text: string): RegisteredGpu[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new InventoryFormatError(`node inventory is not JSON: ${text.slice(0, 80)}`, { cause: error });
  }
  if (!Array.isArray(parsed)) throw new InventoryFormatError('node inventory is not a JSON array');
  return parsed.map((item: unknown) => {
    const device = (item ?? {}) as { id?: unknown; count?: unknown; health?: unknown; devmem?: unknown };
    if (typeof device.id !== 'string') throw new InventoryFormatError('node inventory device without an id');
    // omitempty on every field: a missing count or devmem is 0, a missing health is false.
    return {
      uuid: device.id,
      count: typeof device.count === 'number' ? device.count : 0,
      healthy: device.health === true,
      memoryMiB: typeof device.devmem === 'number' ? device.devmem : 0,
    };
  });
}

/** `id,count,devmem,devcore,type,numa,health[,index,mode]:` per device. */
function fromLegacy(text: string): RegisteredGpu[] {
  return text
    .split(':')
    .filter((piece) => piece.includes(','))
    .map((piece) => {
      const fields = piece.split(',');
      if (fields.length !== 7 && fields.length !== 9)
        throw new InventoryFormatError(`legacy node inventory entry with ${fields.length} fields: ${piece}`);
      return {
        uuid: fields[0] ?? '',
        count: Number(fields[1]),
        healthy: fields[6] === 'true',
        memoryMiB: Number(fields[2]),
      };
    });
}

export function decodeRegisteredGpus(text: string): RegisteredGpu[] {
  return text.trimStart().startsWith('[') ? fromJson(text) : fromLegacy(text);
}

/** The replica IDs kubelet sees for `nvidia.com/gpu`. */
export function replicaIds(gpus: readonly RegisteredGpu[]): string[] {
  return gpus
    .filter((gpu) => gpu.healthy)
    .flatMap((gpu) => Array.from({ length: gpu.count }, (_, index) => `${gpu.uuid}-${index}`));
}
