//! The registry's tool list in a provider's format, for the tools a caller may use.

use serde_json::Value;

use crate::context::CallContext;
use crate::contract::ToolContract;
use crate::export::{ExportError, Profile, ProfileError};
use crate::registry::Registry;

impl Registry {
    /// The tool list in `profile`'s format: the value of the provider request's `tools` field,
    /// sorted by name, with only the tools `ctx` may use (least privilege: a tool the caller
    /// may not use is not shown to the model) and the current values of dynamic enums.
    ///
    /// A tool drops out of the list, and only that tool, when a dynamic argument it requires
    /// has no allowed value now, when its `#[one_of]` function panics, or when its current values
    /// go beyond what the provider takes (more than strict OpenAI's 1,000 `enum` values, say);
    /// the last two are logged as errors with `tracing`. The build has checked everything else.
    ///
    /// The profile must be one the registry was built for
    /// ([`RegistryBuilder::profile`](crate::RegistryBuilder::profile)).
    pub fn export(&self, ctx: &CallContext, profile: Profile) -> Result<Value, ExportError> {
        if !self.serves(profile) {
            return Err(ExportError::UndeclaredProfile(profile));
        }
        let definitions = self
            .shown_to(ctx)
            .filter_map(
                |(contract, schema)| match profile.transform(contract, &schema) {
                    Ok(definition) => Some(definition),
                    Err(reason) => {
                        tracing::error!(
                            tool = contract.name(),
                            %profile,
                            reason,
                            "the tool's dynamic values do not fit the profile; the tool is left out of the export"
                        );
                        None
                    }
                },
            )
            .collect();
        Ok(profile.tools_field(definitions))
    }

    /// Checks that every tool fits `profile`, whether or not the registry declares it: for a
    /// test that asserts a registry could serve one more provider. Returns every misfit.
    ///
    /// ```
    /// use portcullis_core::export::Profile;
    /// use portcullis_core::Registry;
    ///
    /// let registry = Registry::builder().build().unwrap();
    /// assert!(registry.check_profile(Profile::Gemini).is_ok());
    /// ```
    pub fn check_profile(&self, profile: Profile) -> Result<(), Vec<ProfileError>> {
        let mut errors: Vec<ProfileError> = self
            .contracts()
            .filter_map(|contract| profile.check(contract).err())
            .collect();
        if errors.is_empty() {
            let contracts: Vec<&ToolContract> = self.contracts().collect();
            errors.extend(profile.check_together(&contracts).err());
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}
