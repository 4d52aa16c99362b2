/**
 * The console's Studio at `/studio` (and its files at `/studio/assets/{file}`), on the agent
 * server's own origin: what `berth dev` prints instead of a hosted Studio, so it works offline and
 * without mixed content or Private Network Access in the way. Only `berth dev` turns it on
 * (AgentServerConfig.studioDir); a deployed agent server never serves it (the gateway's console has
 * each deployment's Studio). Like the rest of `berth dev`'s API, it takes no credential.
 */
import { ConsoleFiles } from '@berth/http';
import type { RequestHandler } from 'express';

const ASSET = /^\/studio\/assets\/([^/]+)$/;

export function studioPages(consoleDir: string): RequestHandler {
  const files = new ConsoleFiles(consoleDir, { assetsPath: '/studio/assets', mode: 'studio' });
  return (req, res, next) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return next();
    if (req.path === '/studio' || req.path === '/studio/') return files.sendPage(res);
    const asset = ASSET.exec(req.path)?.[1];
    // As sent, not decoded (the build's names need no escaping): only a listed file's name matches
    // (ConsoleFiles), so no path reaches the file system.
    if (asset !== undefined) return files.sendAsset(asset, req, res);
    next();
  };
}
