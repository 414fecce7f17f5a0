import { expect } from 'chai';
import {
  compareEvents,
  EventDigest,
  eventTimeOf,
  liveEventOf,
  type LiveEvent,
} from '../../../src/local/live-events.js';

/** A core/v1 Event as the apiserver returns it (watch JSON: times as strings). */
function rawEvent(options: {
  name: string;
  rv: number;
  time?: string;
  eventTime?: string;
  reason?: string;
  pod?: string;
  podUid?: string;
  uid?: string;
}): Record<string, unknown> {
  return {
    metadata: {
      name: options.name,
      namespace: 'default',
      uid: options.uid ?? `uid-${options.name}`,
      resourceVersion: String(options.rv),
    },
    involvedObject: { kind: 'Pod', namespace: 'default', name: options.pod ?? 'p', uid: options.podUid },
    reason: options.reason ?? 'Scheduled',
    message: `message of ${options.name}`,
    type: 'Normal',
    ...(options.time === undefined ? {} : { lastTimestamp: options.time, firstTimestamp: options.time }),
    ...(options.eventTime === undefined ? {} : { eventTime: options.eventTime }),
  };
}

const event = (options: Parameters<typeof rawEvent>[0]): LiveEvent => liveEventOf(rawEvent(options));

describe('live view events', () => {
  describe('eventTimeOf', () => {
    it('takes series.lastObservedTime, then lastTimestamp, then eventTime, then firstTimestamp, then creation', () => {
      expect(
        eventTimeOf({
          series: { lastObservedTime: '2026-12-01T10:00:09.5Z' },
          lastTimestamp: '2026-12-01T10:00:01Z',
        }).toISOString(),
      ).to.equal('2026-12-01T10:00:09.500Z');
      expect(
        eventTimeOf({ lastTimestamp: '2026-12-01T10:00:01Z', eventTime: '2026-12-01T10:00:02.000000Z' }).toISOString(),
      ).to.equal('2026-12-01T10:00:01.000Z');
      // kube-scheduler (events.k8s.io) leaves lastTimestamp empty and sets a microsecond eventTime.
      expect(eventTimeOf({ lastTimestamp: null, eventTime: '2026-12-01T10:00:02.123456Z' }).toISOString()).to.equal(
        '2026-12-01T10:00:02.123Z',
      );
      expect(eventTimeOf({ firstTimestamp: new Date('2026-12-01T10:00:03Z') }).toISOString()).to.equal(
        '2026-12-01T10:00:03.000Z',
      );
      expect(eventTimeOf({ metadata: { creationTimestamp: '2026-12-01T10:00:04Z' } }).toISOString()).to.equal(
        '2026-12-01T10:00:04.000Z',
      );
      expect(eventTimeOf({}).getTime()).to.equal(0);
    });

    it('reads the count of an aggregated series', () => {
      expect(
        liveEventOf({
          ...rawEvent({ name: 'a', rv: 1 }),
          series: { count: 7, lastObservedTime: '2026-12-01T10:00:00Z' },
        }).count,
      ).to.equal(7);
      expect(liveEventOf({ ...rawEvent({ name: 'a', rv: 1 }), count: 3 }).count).to.equal(3);
    });
  });

  describe('compareEvents', () => {
    it('orders events of the same second by the apiserver write order, whatever their names', () => {
      const events = [
        event({ name: 'a-third', rv: 30, time: '2026-12-01T10:00:00Z' }),
        event({ name: 'z-first', rv: 9, time: '2026-12-01T10:00:00Z' }),
        event({ name: 'm-second', rv: 10, time: '2026-12-01T10:00:00Z' }),
      ].sort(compareEvents);
      // rv 9 < 10 < 30 as numbers (as text "10" < "30" < "9").
      expect(events.map((e) => e.key)).to.deep.equal(['uid-z-first', 'uid-m-second', 'uid-a-third']);
    });

    it('orders a whole-second lastTimestamp and a sub-second eventTime of one second by write order', () => {
      const scheduler = event({ name: 'sched', rv: 100, eventTime: '2026-12-01T10:00:00.900000Z' });
      const warden = event({ name: 'warden', rv: 101, time: '2026-12-01T10:00:00Z' });
      expect([warden, scheduler].sort(compareEvents).map((e) => e.key)).to.deep.equal(['uid-sched', 'uid-warden']);
    });

    it('orders by time across seconds before anything else', () => {
      const later = event({ name: 'later', rv: 5, time: '2026-12-01T10:00:01Z' });
      const earlier = event({ name: 'earlier', rv: 50, time: '2026-12-01T10:00:00Z' });
      expect([later, earlier].sort(compareEvents).map((e) => e.key)).to.deep.equal(['uid-earlier', 'uid-later']);
    });
  });

  describe('EventDigest', () => {
    it('keeps the newest N of more than 200 events, not the first ones by name', () => {
      const digest = new EventDigest({ recent: 200, pods: 10 });
      // Names sort in the opposite order of time: a LIST with limit 200 would return the oldest.
      const all = Array.from({ length: 250 }, (_, index) =>
        event({
          name: `ev-${String(999 - index).padStart(4, '0')}`,
          rv: 1000 + index,
          time: new Date(Date.UTC(2026, 11, 1, 10, 0, index)).toISOString(),
        }),
      );
      digest.replace([...all].sort((a, b) => (a.key < b.key ? -1 : 1)));
      const recent = digest.recent();
      expect(recent).to.have.length(200);
      expect(recent[0]?.resourceVersion).to.equal('1050');
      expect(recent.at(-1)?.resourceVersion).to.equal('1249');
      expect(recent.map((e) => e.resourceVersion)).to.deep.equal(all.slice(50).map((e) => e.resourceVersion));
    });

    it('takes a watched newer event and drops the oldest; ignores one older than all it keeps', () => {
      const digest = new EventDigest({ recent: 2, pods: 10 });
      digest.replace([
        event({ name: 'a', rv: 1, time: '2026-12-01T10:00:01Z' }),
        event({ name: 'b', rv: 2, time: '2026-12-01T10:00:02Z' }),
      ]);
      digest.upsert(event({ name: 'old', rv: 3, time: '2026-12-01T09:00:00Z' }));
      expect(digest.recent().map((e) => e.key)).to.deep.equal(['uid-a', 'uid-b']);
      digest.upsert(event({ name: 'c', rv: 4, time: '2026-12-01T10:00:03Z' }));
      expect(digest.recent().map((e) => e.key)).to.deep.equal(['uid-b', 'uid-c']);
    });

    it('moves an updated (aggregated) event to its new time instead of keeping two copies', () => {
      const digest = new EventDigest({ recent: 5, pods: 10 });
      digest.replace([
        event({ name: 'a', rv: 1, time: '2026-12-01T10:00:01Z' }),
        event({ name: 'b', rv: 2, time: '2026-12-01T10:00:02Z' }),
      ]);
      digest.upsert(event({ name: 'a', rv: 3, time: '2026-12-01T10:00:05Z' }));
      expect(digest.recent().map((e) => e.key)).to.deep.equal(['uid-b', 'uid-a']);
      digest.remove(event({ name: 'b', rv: 4, time: '2026-12-01T10:00:02Z' }));
      expect(digest.recent().map((e) => e.key)).to.deep.equal(['uid-a']);
    });

    it("keeps each pod's latest pending reason even when newer events push it out of the recent ones", () => {
      const digest = new EventDigest({ recent: 3, pods: 10 });
      digest.upsert(
        event({ name: 'f1', rv: 1, time: '2026-12-01T10:00:00Z', reason: 'FilteringFailed', pod: 'big', podUid: 'u1' }),
      );
      digest.upsert(
        event({
          name: 'f2',
          rv: 2,
          time: '2026-12-01T10:00:01Z',
          reason: 'FailedScheduling',
          pod: 'big',
          podUid: 'u1',
        }),
      );
      digest.upsert(
        event({ name: 'f0', rv: 3, time: '2026-12-01T09:59:00Z', reason: 'NodeLockWait', pod: 'big', podUid: 'u1' }),
      );
      for (let index = 0; index < 5; index++)
        digest.upsert(event({ name: `x${index}`, rv: 10 + index, time: `2026-12-01T10:01:0${index}Z` }));
      expect(digest.recent().some((e) => e.object.name === 'big')).to.equal(false);
      expect(digest.reasonFor('default', 'big', 'u1')?.key).to.equal('uid-f2');
      // Another incarnation of the same name: the old reason is not its reason.
      expect(digest.reasonFor('default', 'big', 'u2')).to.equal(undefined);
      expect(digest.reasonFor('default', 'other')).to.equal(undefined);
      // Not a pending reason: never kept as one.
      expect(digest.reasonFor('default', 'p')).to.equal(undefined);
      // A LIST handing members() on rebuilds the same digest.
      const copy = new EventDigest({ recent: 3, pods: 10 });
      copy.replace(digest.members());
      expect(copy.reasonFor('default', 'big', 'u1')?.key).to.equal('uid-f2');
      expect(copy.recent().map((e) => e.key)).to.deep.equal(digest.recent().map((e) => e.key));
    });

    it('forgets the least recently updated pod reason when full, and a deleted reason event', () => {
      const digest = new EventDigest({ recent: 1, pods: 2 });
      digest.upsert(event({ name: 'r1', rv: 1, time: '2026-12-01T10:00:00Z', reason: 'FilteringFailed', pod: 'one' }));
      digest.upsert(event({ name: 'r2', rv: 2, time: '2026-12-01T10:00:01Z', reason: 'FilteringFailed', pod: 'two' }));
      digest.upsert(event({ name: 'r3', rv: 3, time: '2026-12-01T10:00:02Z', reason: 'BindingFailed', pod: 'three' }));
      expect(digest.reasonFor('default', 'one')).to.equal(undefined);
      expect(digest.reasonFor('default', 'two')?.key).to.equal('uid-r2');
      digest.remove(event({ name: 'r2', rv: 4, reason: 'FilteringFailed', pod: 'two' }));
      expect(digest.reasonFor('default', 'two')).to.equal(undefined);
      expect(digest.reasonFor('default', 'three')?.reason).to.equal('BindingFailed');
    });
  });
});
