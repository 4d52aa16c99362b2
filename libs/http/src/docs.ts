/**
 * `/openapi.json` and a `/docs` page (Swagger UI served from the swagger-ui-dist package, so the
 * page works without internet access).
 */
import express, { type Router } from 'express';
import swaggerUi from 'swagger-ui-dist';

export function docsRouter(document: () => Record<string, unknown>, title: string): Router {
  const router = express.Router();
  let cached: Record<string, unknown> | undefined;
  router.get('/openapi.json', (_req, res) => {
    cached ??= document();
    res.json(cached);
  });
  router.use('/docs/assets', express.static(swaggerUi.getAbsoluteFSPath(), { index: false }));
  router.get('/docs', (_req, res) => {
    res.type('html').send(`<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>${escapeHtml(title)}</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>`);
  });
  // Inline scripts would need a CSP exception; a tiny static script does not.
  router.get('/docs/init.js', (_req, res) => {
    res.type('application/javascript').send("window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', persistAuthorization: true });\n");
  });
  return router;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
