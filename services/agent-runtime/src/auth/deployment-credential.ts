/**
 * The per-deployment credential: a deployed agent server answers only requests that carry it.
 * The gateway adds it to every request it forwards (clients never see it), so a caller that
 * reaches the agent server's port directly — another deployment's code on the same machine or
 * in the same cluster — gets 401. Routes declared public stay open: only `GET /ok`, the liveness
 * probe, which says nothing but "up".
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { DEPLOYMENT_CREDENTIAL_HEADER } from '@berth/http';
import type { IncomingMessage } from 'node:http';
import type { RequestHandler } from 'express';

const digest = (value: string) => createHash('sha256').update(value).digest();

/** Whether a request carries the credential; takes it out of the request either way. */
export function deploymentCredentialCheck(credential: string): (req: IncomingMessage) => boolean {
  const expected = digest(credential);
  return (req) => {
    const sent = req.headers[DEPLOYMENT_CREDENTIAL_HEADER];
    // Graph code and the project's own auth handler never see it.
    delete req.headers[DEPLOYMENT_CREDENTIAL_HEADER];
    return typeof sent === 'string' && timingSafeEqual(digest(sent), expected);
  };
}

/** Refuses requests without the credential, but to the routes declared `access: 'public'` (`isPublic`). */
export function requireDeploymentCredential(credential: string, isPublic: (method: string, path: string) => boolean): RequestHandler {
  const check = deploymentCredentialCheck(credential);
  return (req, res, next) => {
    const carried = check(req);
    if (isPublic(req.method, req.path)) return next();
    if (carried) return next();
    res.status(401).json({ detail: 'This agent server answers only requests forwarded by the Berth gateway: call it through the deployment URL.' });
  };
}
