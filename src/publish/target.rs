//! Where a tree is published: the TARGET url, the store it opens, and errors worded for users.

use anyhow::{Context, Result, bail};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, RetryConfig};
use std::sync::Arc;
use std::time::Duration;

/// A parsed TARGET: `s3://BUCKET[/PREFIX]`, `gs://BUCKET[/PREFIX]`, `az://CONTAINER[/PREFIX]`
/// or `file:///PATH`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// Which kind of store.
    pub(crate) kind: Kind,
    /// Bucket or container (empty for `file://`).
    pub(crate) bucket: String,
    /// Prefix inside the bucket, or the folder of a `file://` target; no slash at either end.
    pub(crate) prefix: String,
    /// The url as the user wrote it, for messages.
    pub(crate) shown: String,
    /// The file whose upload is the publish's commit point, for messages: the tree's
    /// `manifest`, or an archive's `root`.
    pub(crate) commit_point: &'static str,
}

/// The kinds of store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Amazon S3 or an S3-compatible store (`s3://`).
    S3,
    /// Google Cloud Storage (`gs://`).
    Gcs,
    /// Azure Blob Storage (`az://`).
    Azure,
    /// A local folder (`file://`).
    File,
}

impl Target {
    /// Parses a TARGET url.
    pub(crate) fn parse(url: &str) -> Result<Target> {
        let usage = "TARGET is s3://BUCKET[/PREFIX], gs://BUCKET[/PREFIX], az://CONTAINER[/PREFIX] or file:///PATH";
        let (scheme, rest) = url.split_once("://").with_context(|| format!("{url:?} is not a url: {usage}"))?;
        let kind = match scheme {
            "s3" => Kind::S3,
            "gs" => Kind::Gcs,
            "az" | "azure" => Kind::Azure,
            "file" => Kind::File,
            _ => bail!("{url:?}: unknown scheme {scheme:?}: {usage}"),
        };
        if kind == Kind::File {
            if !rest.starts_with('/') {
                bail!("{url:?}: a file target needs an absolute path, file:///PATH (three slashes)");
            }
            let prefix = rest.trim_end_matches('/').to_string();
            let prefix = if prefix.is_empty() { "/".to_string() } else { prefix };
            return Ok(Target {
                kind,
                bucket: String::new(),
                prefix,
                shown: url.to_string(),
                commit_point: "manifest",
            });
        }
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            bail!("{url:?} names no bucket: {usage}");
        }
        let prefix = prefix.trim_matches('/');
        if prefix.split('/').any(|part| part == "." || part == "..") || prefix.contains("//") {
            bail!("{url:?}: the prefix must not hold empty, `.` or `..` segments");
        }
        Ok(Target {
            kind,
            bucket: bucket.to_string(),
            prefix: prefix.to_string(),
            shown: url.to_string(),
            commit_point: "manifest",
        })
    }

    /// True when the store keeps `Content-Type` and `Cache-Control` with each object (a local
    /// folder does not).
    pub(crate) fn has_headers(&self) -> bool {
        self.kind != Kind::File
    }

    /// The key of a file of the tree on this target.
    pub(crate) fn key(&self, path: &str) -> ObjectPath {
        if self.kind == Kind::File || self.prefix.is_empty() {
            ObjectPath::from(path)
        } else {
            ObjectPath::from(format!("{}/{path}", self.prefix))
        }
    }

    /// The prefix every key of the tree starts with, for listing.
    pub(crate) fn list_prefix(&self) -> Option<ObjectPath> {
        (self.kind != Kind::File && !self.prefix.is_empty()).then(|| ObjectPath::from(self.prefix.as_str()))
    }

    /// The path of a listed key relative to the tree, if it is under the prefix.
    pub(crate) fn relative(&self, key: &ObjectPath) -> Option<String> {
        let key = key.as_ref();
        match self.list_prefix() {
            None => Some(key.to_string()),
            Some(prefix) => key.strip_prefix(prefix.as_ref()).and_then(|rest| rest.strip_prefix('/')).map(String::from),
        }
    }

    /// Opens the store, with credentials and settings from the environment.
    pub(crate) fn open(&self, endpoint: Option<&str>, retries: usize) -> Result<Arc<dyn ObjectStore>> {
        let retry = RetryConfig {
            max_retries: retries,
            retry_timeout: Duration::from_secs(120),
            backoff: object_store::BackoffConfig::default(),
        };
        let store: Arc<dyn ObjectStore> = match self.kind {
            Kind::File => {
                let folder = std::path::Path::new(&self.prefix);
                crate::fsutil::create_dir_all(folder)?;
                Arc::new(object_store::local::LocalFileSystem::new_with_prefix(folder).with_context(|| {
                    format!("cannot publish into {}: it is not a folder gen can use", folder.display())
                })?)
            }
            Kind::S3 => Arc::new(self.open_s3(endpoint, retry)?),
            Kind::Gcs => Arc::new(
                object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_bucket_name(&self.bucket)
                    .with_retry(retry)
                    .build()
                    .with_context(|| format!("cannot open {}: check GOOGLE_APPLICATION_CREDENTIALS", self.shown))?,
            ),
            Kind::Azure => Arc::new(
                object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_container_name(&self.bucket)
                    .with_retry(retry)
                    .build()
                    .with_context(|| {
                        format!(
                            "cannot open {}: set AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY (or another \
                             Azure credential) in the environment",
                            self.shown
                        )
                    })?,
            ),
        };
        Ok(store)
    }

    fn open_s3(&self, endpoint: Option<&str>, retry: RetryConfig) -> Result<object_store::aws::AmazonS3> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let has_keys = env("AWS_ACCESS_KEY_ID").is_some() && env("AWS_SECRET_ACCESS_KEY").is_some();
        let has_role = [
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        ]
        .iter()
        .any(|name| env(name).is_some());
        if !has_keys && !has_role {
            bail!(
                "no credentials for {}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment (never \
                 on the command line), or run where a web identity or container role provides them",
                self.shown
            );
        }
        let mut builder =
            object_store::aws::AmazonS3Builder::from_env().with_bucket_name(&self.bucket).with_retry(retry);
        if env("AWS_REGION").is_none() && env("AWS_DEFAULT_REGION").is_none() {
            builder = builder.with_region("us-east-1");
        }
        let endpoint =
            endpoint.map(String::from).or_else(|| env("AWS_ENDPOINT_URL_S3")).or_else(|| env("AWS_ENDPOINT_URL"));
        if let Some(endpoint) = endpoint {
            // An S3-compatible store: path-style addressing, plain HTTP allowed when asked for.
            builder = builder
                .with_endpoint(endpoint.trim_end_matches('/'))
                .with_virtual_hosted_style_request(false)
                .with_allow_http(endpoint.starts_with("http://"));
        }
        builder.build().with_context(|| format!("cannot open {}", self.shown))
    }

    /// Where the store is, for messages: the endpoint (a user and password in it hidden) or the
    /// bucket's url.
    pub(crate) fn place(&self, endpoint: Option<&str>) -> String {
        let endpoint = endpoint.map(String::from).or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
        match (self.kind, endpoint) {
            (Kind::S3, Some(endpoint)) => format!("{} at {}", self.shown, redact(&endpoint, &endpoint)),
            _ => self.shown.clone(),
        }
    }
}

/// `text` with the user and password of the url `endpoint` (`http://user:password@host`)
/// replaced by `***` wherever they appear, so that no message shows them.
pub(crate) fn redact(text: &str, endpoint: &str) -> String {
    let Some((_, rest)) = endpoint.split_once("://") else { return text.to_string() };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    match authority.rsplit_once('@') {
        Some((user_info, _)) if !user_info.is_empty() => text.replace(&format!("{user_info}@"), "***@"),
        _ => text.to_string(),
    }
}

/// [`redact`] for every endpoint gen may have used: `--endpoint`, `AWS_ENDPOINT_URL_S3` and
/// `AWS_ENDPOINT_URL`.
pub(crate) fn redact_endpoints(text: &str, endpoint: Option<&str>) -> String {
    let env = ["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"].map(|name| std::env::var(name).ok());
    endpoint
        .map(String::from)
        .into_iter()
        .chain(env.into_iter().flatten())
        .fold(text.to_string(), |text, url| redact(&text, &url))
}

/// How far a publish got when a request failed: what the error says about the target's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Before the new manifest was written: nothing deleted, the old manifest live.
    Before,
    /// Deleting removed objects, after the new manifest.
    Deleting,
    /// Repairing, after the new manifest and its deletes, what an unfinished publish wrote
    /// meanwhile (the second look).
    Repairing,
    /// Everything done but removing the marker.
    MarkerLeft,
    /// Everything done but removing the lock.
    LockLeft,
}

/// An error of the store, worded for a user: what went wrong with which target, and what to do.
pub(crate) fn explain(
    error: object_store::Error,
    doing: &str,
    target: &Target,
    place: &str,
    stage: Stage,
) -> anyhow::Error {
    let point = target.commit_point;
    use object_store::Error as E;
    let text = format!("{error}");
    let chain = error_chain(&error);
    let advice = match &error {
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => format!(
            "access denied by {place}: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and that this key may \
             read, write, list and delete objects in {}",
            target.bucket
        ),
        _ if chain.contains("NoSuchBucket") || chain.contains("bucket does not exist") => format!(
            "bucket {:?} does not exist at {place}: create it first (e.g. `aws s3 mb s3://{}`), or fix TARGET",
            target.bucket, target.bucket
        ),
        _ if chain.contains("InvalidAccessKeyId")
            || chain.contains("SignatureDoesNotMatch")
            || chain.contains("AccessDenied")
            || chain.contains("403 Forbidden") =>
        {
            format!(
                "access denied by {place}: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and that this key may \
                 read, write, list and delete objects in {}",
                target.bucket
            )
        }
        _ if chain.contains("timed out") || chain.contains("deadline has elapsed") => format!(
            "{place} stopped answering while {doing} (a request timed out): the store is reachable but stalled or \
             overloaded; try again later (--retries sets how often a timed-out request is retried)"
        ),
        _ if chain.contains("onnection refused")
            || chain.contains("error sending request")
            || chain.contains("dns error") =>
        {
            format!(
                "cannot reach {place}: check that the store is up and its address right (--endpoint, AWS_ENDPOINT_URL)"
            )
        }
        _ => format!("{doing} on {place} failed"),
    };
    let state = match stage {
        Stage::Before => format!("nothing was deleted, and the published {point} is still the previous one"),
        Stage::Deleting => {
            format!(
                "the new {point} is published, but some removed objects are left: run gen publish again to delete them"
            )
        }
        Stage::Repairing => format!(
            "the new {point} is published and removed objects deleted, but objects an unfinished publish wrote \
             meanwhile may not be repaired yet: the marker .gen-publish.json is left, so the next gen publish \
             compares every object again and repairs them"
        ),
        Stage::MarkerLeft => format!(
            "the publish itself succeeded (the new {point} is live, every removed object deleted), but its marker \
             .gen-publish.json is left: the next gen publish compares every object once and removes it"
        ),
        Stage::LockLeft => {
            "the publish itself succeeded, but its lock .gen-publish.lock is left: the next gen publish \
                            must pass --take-over-lock (or delete that object by hand)"
                .to_string()
        }
    };
    anyhow::anyhow!("{advice}; {state}\n  cause: {text}")
}

/// The error and all its sources, as one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_with_their_prefix() {
        let t = Target::parse("s3://bucket/some/prefix/").unwrap();
        assert_eq!((t.kind, t.bucket.as_str(), t.prefix.as_str()), (Kind::S3, "bucket", "some/prefix"));
        assert_eq!(t.key("api/v2/index.json").as_ref(), "some/prefix/api/v2/index.json");
        assert_eq!(
            t.relative(&ObjectPath::from("some/prefix/api/v2/index.json")).as_deref(),
            Some("api/v2/index.json")
        );
        assert_eq!(t.relative(&ObjectPath::from("some/prefixed/x")), None);
        let t = Target::parse("gs://b").unwrap();
        assert_eq!((t.kind, t.prefix.as_str()), (Kind::Gcs, ""));
        assert_eq!(t.key("manifest.json").as_ref(), "manifest.json");
        let t = Target::parse("file:///srv/api/").unwrap();
        assert_eq!((t.kind, t.prefix.as_str()), (Kind::File, "/srv/api"));
        for bad in ["out", "http://x/y", "s3://", "s3:///p", "file://relative", "s3://b/../x"] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }
}
