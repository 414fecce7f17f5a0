import { expect } from 'chai';
import { parseAdmissionReview } from '../../../src/admission/parse-review.js';

const json = (value: unknown) => Buffer.from(JSON.stringify(value));
const review = (request: unknown, apiVersion = 'admission.k8s.io/v1') =>
  json({ apiVersion, kind: 'AdmissionReview', request });

describe('parseAdmissionReview (validate before decode)', () => {
  it('accepts v1 and v1beta1 reviews and keeps their version', () => {
    for (const version of ['admission.k8s.io/v1', 'admission.k8s.io/v1beta1']) {
      const parsed = parseAdmissionReview(
        review({ uid: 'u1', operation: 'CREATE' }, version),
        'application/json; charset=utf-8',
      );
      expect(parsed).to.deep.include({ ok: true, version });
    }
  });

  const failures: {
    title: string;
    body: Buffer | undefined;
    contentType?: string;
    expect: { httpStatus: number; code: number; uid?: string; message: string };
  }[] = [
    {
      title: 'no content type',
      body: review({ uid: 'u' }),
      contentType: undefined,
      expect: { httpStatus: 400, code: 415, message: 'Content-Type must be application/json, got none' },
    },
    {
      title: 'text/plain',
      body: review({ uid: 'u' }),
      contentType: 'text/plain',
      expect: { httpStatus: 400, code: 415, message: 'Content-Type must be application/json, got "text/plain"' },
    },
    {
      title: 'empty body',
      body: Buffer.alloc(0),
      contentType: 'application/json',
      expect: { httpStatus: 400, code: 400, message: 'request body is empty' },
    },
    {
      title: 'no body',
      body: undefined,
      contentType: 'application/json',
      expect: { httpStatus: 400, code: 400, message: 'request body is empty' },
    },
    {
      title: 'a JSON array',
      body: json([1]),
      contentType: 'application/json',
      expect: { httpStatus: 400, code: 400, message: 'request body is not a JSON object' },
    },
    {
      title: 'unknown version with a uid',
      body: review({ uid: 'u9', operation: 'CREATE' }, 'admission.k8s.io/v2'),
      contentType: 'application/json',
      expect: {
        httpStatus: 200,
        code: 400,
        uid: 'u9',
        message:
          'unsupported AdmissionReview apiVersion "admission.k8s.io/v2"; expected admission.k8s.io/v1 or admission.k8s.io/v1beta1',
      },
    },
    {
      title: 'wrong kind',
      body: json({ apiVersion: 'admission.k8s.io/v1', kind: 'Pod', request: { uid: 'u2' } }),
      contentType: 'application/json',
      expect: { httpStatus: 200, code: 400, uid: 'u2', message: 'expected kind AdmissionReview, got "Pod"' },
    },
    {
      title: 'no request',
      body: json({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }),
      contentType: 'application/json',
      expect: { httpStatus: 400, code: 400, message: 'AdmissionReview has no request' },
    },
    {
      title: 'no uid',
      body: review({ operation: 'CREATE' }),
      contentType: 'application/json',
      expect: { httpStatus: 400, code: 400, message: 'AdmissionReview request has no uid' },
    },
    {
      title: 'no operation',
      body: review({ uid: 'u3' }),
      contentType: 'application/json',
      expect: { httpStatus: 200, code: 400, uid: 'u3', message: 'AdmissionReview request has no operation' },
    },
  ];
  for (const failure of failures) {
    it(`answers ${failure.title} with ${failure.expect.httpStatus}/${failure.expect.code}`, () => {
      const parsed = parseAdmissionReview(failure.body, failure.contentType);
      expect(parsed).to.deep.include({ ok: false, ...failure.expect });
      if (failure.expect.uid === undefined) expect(parsed).not.to.have.property('uid');
    });
  }

  it('reports unparsable JSON with the parser message', () => {
    const parsed = parseAdmissionReview(Buffer.from('{"apiVersion":'), 'application/json');
    expect(parsed).to.deep.include({ ok: false, httpStatus: 400, code: 400 });
    expect(!parsed.ok && parsed.message).to.match(/^request body is not valid JSON: /);
  });
});
