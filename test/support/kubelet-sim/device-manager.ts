/**
 * kubelet's device manager for one extended resource on one node, reduced to its bookkeeping: which
 * advertised device IDs each pod holds, devices of init containers reused by the containers after
 * them, and everything a pod held freed when it ends.
 */
export class DevicesUnavailableError extends Error {
  constructor(
    readonly resource: string,
    readonly requested: number,
    readonly available: number,
  ) {
    // kubelet's text (devicemanager), which it wraps into UnexpectedAdmissionError.
    super(`requested number of devices unavailable for ${resource}. Requested: ${requested}, Available: ${available}`);
    this.name = 'DevicesUnavailableError';
  }
}

export class DeviceManager {
  /** device ID → UID of the pod holding it. */
  private readonly holders = new Map<string, string>();
  /** pod UID → devices its finished init containers left for its later containers. */
  private readonly reusable = new Map<string, string[]>();

  constructor(
    readonly resource: string,
    private devices: readonly string[],
  ) {}

  /**
   * ListAndWatch sent a new device list (the plugin died: none; it came back: all). Running pods keep
   * what they hold, as kubelet's checkpoint does; only listed devices are handed out from now on.
   */
  replaceDevices(devices: readonly string[]): void {
    this.devices = [...devices];
  }

  /** The devices the plugin lists now. */
  get listed(): readonly string[] {
    return this.devices;
  }

  /** Devices for one container; `init` marks an init container, whose devices later containers reuse. */
  take(podUid: string, count: number, init: boolean): string[] {
    const reuse = this.reusable.get(podUid) ?? [];
    const fromReuse = reuse.splice(0, count);
    const free = this.devices.filter((device) => !this.holders.has(device));
    const needed = count - fromReuse.length;
    if (free.length < needed) {
      reuse.unshift(...fromReuse);
      throw new DevicesUnavailableError(this.resource, count, free.length + fromReuse.length);
    }
    const taken = [...fromReuse, ...free.slice(0, needed)];
    for (const device of taken) this.holders.set(device, podUid);
    if (init) this.reusable.set(podUid, [...(this.reusable.get(podUid) ?? []), ...taken]);
    return taken;
  }

  /** Everything `podUid` holds goes back to the pool. */
  free(podUid: string): string[] {
    const freed = [...this.holders].filter(([, holder]) => holder === podUid).map(([device]) => device);
    for (const device of freed) this.holders.delete(device);
    this.reusable.delete(podUid);
    return freed;
  }

  heldBy(podUid: string): string[] {
    return [...this.holders].filter(([, holder]) => holder === podUid).map(([device]) => device);
  }

  get available(): number {
    return this.devices.filter((device) => !this.holders.has(device)).length;
  }
}
