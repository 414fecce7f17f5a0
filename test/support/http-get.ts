import { request as httpRequest, type Agent as HttpAgent, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest, type Agent as HttpsAgent } from 'node:https';

/** What a listener answered: the status, the body as text, and the headers (e.g. the content type). */
export interface HttpAnswer {
  status: number;
  body: string;
  headers: IncomingHttpHeaders;
}

export interface HttpGetOptions {
  /** Speak TLS and trust only this CA (the one the process under test wrote); plain HTTP without it. */
  caPem?: string;
  /** GET unless given; a request with another method still sends no body. */
  method?: string;
  /**
   * Node's default is the global keep-alive agent. `false` opens a fresh connection that closes
   * after the answer: for a test that stops the listener next and must not keep an idle socket.
   */
  agent?: HttpAgent | HttpsAgent | false;
  /**
   * Resolve a request that got no answer (refused, reset) as status 0 with the error's message as
   * the body, instead of rejecting: for a wait on a listener that is not up yet.
   */
  noAnswerAsStatus0?: boolean;
}

/** One request to a listener on 127.0.0.1, its whole answer read. */
export function httpGet(port: number, path: string, options: HttpGetOptions = {}): Promise<HttpAnswer> {
  const request = options.caPem === undefined ? httpRequest : httpsRequest;
  return new Promise((done, fail) => {
    request(
      {
        host: '127.0.0.1',
        port,
        path,
        ...(options.method === undefined ? {} : { method: options.method }),
        ...(options.caPem === undefined ? {} : { ca: options.caPem }),
        ...(options.agent === undefined ? {} : { agent: options.agent }),
      },
      (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => {
          body += chunk.toString();
        });
        res.on('end', () => {
          done({ status: res.statusCode ?? 0, body, headers: res.headers });
        });
      },
    )
      .on('error', (error) => {
        if (options.noAnswerAsStatus0 === true) done({ status: 0, body: error.message, headers: {} });
        else fail(error);
      })
      .end();
  });
}
