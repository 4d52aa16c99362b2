/** A fetch-style app that is not Hono: it serves `GET /plain`; its 404s leave the rest to the server. */
export const app = {
  fetch(request: Request): Response {
    const url = new URL(request.url);
    if (url.pathname === '/plain') return Response.json({ plain: true, method: request.method });
    return new Response('not mine', { status: 404 });
  },
};

/** Not an app: `langgraph.bad-app.json` points at it. */
export const server = { listen: () => undefined };
