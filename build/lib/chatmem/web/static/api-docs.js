/* The API docs page (/api/docs): Swagger UI from static/vendor, started on the OpenAPI
   description the server names in data-openapi-url.  A file, not an inline script, so the
   page runs under the site's own Content-Security-Policy. */
(function () {
  "use strict";
  const root = document.getElementById("swagger-ui");
  window.SwaggerUIBundle({
    url: root.dataset.openapiUrl,
    domNode: root,
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    // The default validator is an outside service: the page talks to this server only.
    validatorUrl: null,
    presets: [window.SwaggerUIBundle.presets.apis, window.SwaggerUIBundle.SwaggerUIStandalonePreset],
  });
})();
