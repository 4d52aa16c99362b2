/**
 * JSON request bodies: which content types are JSON, and the rule for a body sent with another or
 * no content type (agent-chat-ui's proxy, curl without `-H content-type`). Such a body is read as
 * JSON when the request carries a credential header — a cross-site page cannot send one without a
 * CORS preflight, so no page could have made the request "simple" — and refused with 415
 * otherwise. Never is it ignored.
 */
import express, { type Request, type RequestHandler, type Response } from 'express';
import { UnsupportedMediaTypeError } from './errors.js';

/** Content types parsed as JSON whoever sends them. */
export const JSON_TYPES = ['application/json', 'application/*+json'];

/** Largest JSON body a route takes. */
export const JSON_BODY_LIMIT = '10mb';

/** Headers that carry a credential on Berth's servers (a browser sends neither without a preflight). */
export const CREDENTIAL_HEADERS = ['x-api-key', 'authorization'];

/** The request carries an `x-api-key` or `authorization` header. */
export function hasCredentialHeader(req: Request): boolean {
  return CREDENTIAL_HEADERS.some((name) => req.headers[name] !== undefined);
}

/** The request has a body that no parser has read (a JSON one was, by the app's parser). */
export function hasUnreadBody(req: Request): boolean {
  if (req.body !== undefined || req.readableEnded) return false;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && Number(length) > 0);
}

const anyTypeAsJson: RequestHandler = express.json({ limit: JSON_BODY_LIMIT, type: () => true });

/**
 * Reads an unread body as JSON when `credentialed`, or throws UnsupportedMediaTypeError (415).
 * Parse failures are body-parser's errors, answered as for `application/json` (422, 413, 415).
 */
export async function readBodyAsJson(req: Request, res: Response, credentialed: boolean): Promise<void> {
  if (!credentialed) throw new UnsupportedMediaTypeError('application/json', req.headers['content-type']);
  await new Promise<void>((resolve, reject) => anyTypeAsJson(req, res, (error?: unknown) => (error ? reject(error as Error) : resolve())));
}
