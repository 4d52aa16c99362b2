/**
 * Matches a request's method and path against the Api's route templates in one pass over the
 * templates of its segment count, instead of express's walk through one layer per route (the
 * agent server has ~90, and its run routes come last). Matching follows express's defaults:
 * literal segments compare case-insensitively, a trailing slash is ignored, `{name}` takes one
 * non-empty segment (percent-decoded), and the first template registered wins.
 */

type Segment = { literal: string } | { param: string };

interface Entry<T> {
  method: string;
  template: string;
  segments: Segment[];
  value: T;
}

export type RouteMatch<T> =
  | { kind: 'found'; value: T; params: Record<string, string> }
  /** The path exists with other methods: answer 405 with these in `Allow`. */
  | { kind: 'method'; allow: string[] }
  | { kind: 'none' };

export class RouteTable<T> {
  private readonly bySize = new Map<number, Entry<T>[]>();

  /** Adds a template such as `/threads/{thread_id}/runs` for an upper-case method. */
  add(method: string, template: string, value: T): void {
    const segments: Segment[] = splitPath(template).map((s) => {
      const param = /^\{([A-Za-z_][A-Za-z0-9_]*)\}$/.exec(s)?.[1];
      return param ? { param } : { literal: s.toLowerCase() };
    });
    const list = this.bySize.get(segments.length) ?? [];
    list.push({ method, template, segments, value });
    this.bySize.set(segments.length, list);
  }

  /** HEAD is served by GET routes, as in express. */
  match(method: string, path: string): RouteMatch<T> {
    const parts = splitPath(path);
    const candidates = this.bySize.get(parts.length);
    if (!candidates) return { kind: 'none' };
    const wanted = method === 'HEAD' ? 'GET' : method;
    const lower = parts.map((p) => p.toLowerCase());
    let allowOf: string | undefined;
    for (const entry of candidates) {
      const params = matchSegments(entry.segments, parts, lower);
      if (!params) continue;
      if (entry.method === wanted) return { kind: 'found', value: entry.value, params };
      allowOf ??= entry.template;
    }
    if (!allowOf) return { kind: 'none' };
    // Like express's per-path 405 handlers: the methods of the first template the path matched.
    const allow = candidates.filter((e) => e.template === allowOf).map((e) => e.method);
    return { kind: 'method', allow: [...new Set(allow)] };
  }
}

function splitPath(path: string): string[] {
  const parts = path.split('/');
  parts.shift(); // before the leading slash
  if (parts.length > 1 && parts.at(-1) === '') parts.pop();
  return parts;
}

function matchSegments(segments: Segment[], parts: string[], lower: string[]): Record<string, string> | undefined {
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i]!;
    if ('literal' in segment) {
      if (segment.literal !== lower[i]) return undefined;
      continue;
    }
    const raw = parts[i]!;
    if (raw === '') return undefined;
    try {
      params[segment.param] = raw.includes('%') ? decodeURIComponent(raw) : raw;
    } catch {
      return undefined; // malformed percent-encoding: no such resource
    }
  }
  return params;
}
