import { expect } from 'chai';
import {
  allocatableGpus,
  gpuLiveness,
  HANDSHAKE_WINDOW_MS,
  parseHandshake,
  requestingStamp,
  type LivenessInput,
} from '../../../src/cluster/node-liveness.js';

/** HAMi's scheduler stamp for a moment (Go's time.DateTime in the reader's local time). */
const stamp = (ms: number): string => requestingStamp(new Date(ms));
/** What a v2.7 plugin writes: `"Reported " + time.Now().String()` (UTC plugin clock). */
const goReported = (ms: number): string =>
  `Reported ${new Date(ms)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.(\d{3})Z$/, '.$1000000 +0000 UTC')} m=+1104711.777756895`;

const NOW = Date.UTC(2026, 7, 21, 6, 20, 39);
const input = (over: Partial<LivenessInput>): LivenessInput => ({
  allocatable: undefined,
  handshake: undefined,
  registeredShares: 40,
  reportedBefore: false,
  notReportingSince: undefined,
  now: NOW,
  ...over,
});

describe('node liveness (HAMi CheckHealth: allocatable nvidia.com/gpu and hami.io/node-handshake)', () => {
  describe('parseHandshake', () => {
    it("reads the scheduler's Requesting_<YYYY-MM-DD HH:MM:SS> in local time, as HAMi parses it with time.Local", () => {
      const parsed = parseHandshake('Requesting_2026-08-21 06:20:39');
      expect(parsed.kind).to.equal('requesting');
      expect(parsed.kind === 'requesting' && parsed.at?.getTime()).to.equal(new Date(2026, 7, 21, 6, 20, 39).getTime());
      expect(parseHandshake(stamp(NOW))).to.deep.equal({ kind: 'requesting', at: new Date(NOW) });
    });

    it("an old plugin's Reported <Go time.String()> carries its own offset", () => {
      expect(parseHandshake('Reported 2024-01-23 04:30:04.434037031 +0000 UTC m=+1104711.777756895')).to.deep.equal({
        kind: 'reported',
        at: new Date('2024-01-23T04:30:04.434Z'),
      });
      expect(parseHandshake('Reported 2024-01-23 12:30:04.1 +0800 CST')).to.deep.equal({
        kind: 'reported',
        at: new Date('2024-01-23T04:30:04.100Z'),
      });
    });

    it('unreadable stamps, the old dotted form and a rolled-over date have no time; anything else is other', () => {
      expect(parseHandshake('Requesting_2024.05.14 07:07:33')).to.deep.equal({ kind: 'requesting', at: undefined });
      expect(parseHandshake('Requesting_2026-02-31 00:00:00')).to.deep.equal({ kind: 'requesting', at: undefined });
      expect(parseHandshake('Requesting')).to.deep.equal({ kind: 'requesting', at: undefined });
      expect(parseHandshake('Reported yesterday')).to.deep.equal({ kind: 'reported', at: undefined });
      expect(parseHandshake('Deleted_2026-08-21 06:20:39')).to.deep.equal({ kind: 'other' });
      expect(parseHandshake(undefined)).to.deep.equal({ kind: 'absent' });
      expect(parseHandshake('')).to.deep.equal({ kind: 'absent' });
    });
  });

  it('allocatableGpus: absent is undefined, a plain integer its value, anything else 0', () => {
    expect(allocatableGpus(undefined)).to.equal(undefined);
    expect(allocatableGpus({ cpu: '4' })).to.equal(undefined);
    expect(allocatableGpus({ 'nvidia.com/gpu': '40' })).to.equal(40);
    expect(allocatableGpus({ 'nvidia.com/gpu': '0' })).to.equal(0);
    expect(allocatableGpus({ 'nvidia.com/gpu': '1k' })).to.equal(0);
    expect(allocatableGpus({ 'nvidia.com/gpu': '-1' })).to.equal(0);
  });

  it('allocatable above zero is a reporting plugin, whatever the handshake says (v2.8+ plugins never answer it)', () => {
    const stale = stamp(NOW - 3_600_000);
    expect(
      gpuLiveness(input({ allocatable: 40, handshake: `Requesting_${stale.slice('Requesting_'.length)}` })),
    ).to.deep.equal({ ready: true, via: 'allocatable' });
    expect(gpuLiveness(input({ allocatable: 40, reportedBefore: true }))).to.deep.equal({
      ready: true,
      via: 'allocatable',
    });
  });

  it('a count that differs from the inventory is noted, not refused (HAMi refreshes its inventory on a change)', () => {
    const verdict = gpuLiveness(input({ allocatable: 4, registeredShares: 40 }));
    expect(verdict).to.deep.include({ ready: true, via: 'allocatable' });
    expect(verdict.ready && verdict.note).to.equal(
      'nvidia.com/gpu allocatable 4 differs from the 40 shares hami.io/node-nvidia-register lists',
    );
  });

  it("allocatable 0 or absent: HAMi's 60 s handshake grace for a plugin that has not reported yet, ending exactly at stamp + 60 s", () => {
    const at = NOW - 59_000;
    const fresh = gpuLiveness(input({ allocatable: 0, handshake: stamp(at) }));
    expect(fresh).to.deep.equal({ ready: true, via: 'handshake', validUntil: at + HANDSHAKE_WINDOW_MS });
    expect(gpuLiveness(input({ handshake: stamp(NOW - 60_000) })).ready).to.equal(false);
    expect(gpuLiveness(input({ handshake: goReported(NOW - 10_000) }))).to.deep.include({
      ready: true,
      via: 'handshake',
    });
  });

  it('a plugin that has stopped reporting gets no grace from a fresh handshake (HAMi: a drop to zero is unhealthy at once)', () => {
    const verdict = gpuLiveness(
      input({ allocatable: 0, handshake: stamp(NOW - 1_000), reportedBefore: true, notReportingSince: NOW - 5_000 }),
    );
    expect(verdict.ready).to.equal(false);
    expect(!verdict.ready && verdict.reason).to.match(
      new RegExp(
        /^device plugin stopped reporting since 2026-08-21T06:20:34Z /.source +
          /\(status\.allocatable\["nvidia\.com\/gpu"\] is 0, handshake requested at /.source,
      ),
    );
    expect(!verdict.ready && verdict.since?.getTime()).to.equal(NOW - 5_000);
  });

  it('the reason says what is missing: no allocatable, the unanswered request with its time, no handshake', () => {
    const unanswered = gpuLiveness(input({ handshake: stamp(NOW - 120_000), notReportingSince: NOW - 120_000 }));
    expect(!unanswered.ready && unanswered.reason).to.equal(
      'device plugin not reporting since 2026-08-21T06:18:39Z (no status.allocatable["nvidia.com/gpu"], handshake requested at 2026-08-21T06:18:39Z and not answered within 60s)',
    );
    const none = gpuLiveness(input({ allocatable: 0 }));
    expect(!none.ready && none.reason).to.equal(
      'device plugin not reporting (status.allocatable["nvidia.com/gpu"] is 0, no handshake)',
    );
    const old = gpuLiveness(input({ handshake: goReported(NOW - 600_000) }));
    expect(!old.ready && old.reason).to.contain('last handshake reported at 2026-08-21T06:10:39Z');
    const odd = gpuLiveness(input({ handshake: 'Requesting_soon' }));
    expect(!odd.ready && odd.reason).to.contain('handshake request with an unreadable stamp');
  });
});
