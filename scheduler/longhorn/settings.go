package longhorn

import (
	"strconv"
	"strings"
	"time"
)

// Auto-balance modes, the values of the replica-auto-balance setting and of
// a volume's spec.replicaAutoBalance (where "ignored" means "use the setting").
const (
	AutoBalanceDisabled    = "disabled"
	AutoBalanceLeastEffort = "least-effort"
	AutoBalanceBestEffort  = "best-effort"
)

// Setting names (settings.longhorn.io metadata.name) the planners read.
const (
	SettingReplicaSoftAntiAffinity           = "replica-soft-anti-affinity"
	SettingReplicaZoneSoftAntiAffinity       = "replica-zone-soft-anti-affinity"
	SettingReplicaDiskSoftAntiAffinity       = "replica-disk-soft-anti-affinity"
	SettingStorageMinimalAvailablePercentage = "storage-minimal-available-percentage"
	SettingStorageOverProvisioningPercentage = "storage-over-provisioning-percentage"
	SettingReplicaAutoBalance                = "replica-auto-balance"
	SettingReplicaAutoBalanceDiskPressure    = "replica-auto-balance-disk-pressure-percentage"
	SettingAllowEmptyNodeSelectorVolume      = "allow-empty-node-selector-volume"
	SettingAllowEmptyDiskSelectorVolume      = "allow-empty-disk-selector-volume"
	SettingReplicaReplenishmentWaitInterval  = "replica-replenishment-wait-interval"
	SettingGuaranteedEngineManagerCPU        = "guaranteed-engine-manager-cpu"
	SettingGuaranteedReplicaManagerCPU       = "guaranteed-replica-manager-cpu"
	SettingGuaranteedInstanceManagerCPU      = "guaranteed-instance-manager-cpu"
	SettingGuaranteedEngineCPU               = "guaranteed-engine-cpu"
)

// Settings are the Longhorn settings the planners use, parsed. The zero
// value is not the default: start from [DefaultSettings] (as the reader
// does), which holds Longhorn's defaults, then [Settings.Set] each setting.
// Unknown setting names are ignored.
type Settings struct {
	ReplicaSoftAntiAffinity                  bool          // default false: node anti-affinity is hard
	ReplicaZoneSoftAntiAffinity              bool          // default true
	ReplicaDiskSoftAntiAffinity              bool          // default true
	StorageMinimalAvailablePercentage        int64         // default 25
	StorageOverProvisioningPercentage        int64         // default 100
	ReplicaAutoBalance                       string        // default "disabled"
	ReplicaAutoBalanceDiskPressurePercentage int64         // default 90; 0 turns the pressure move off
	AllowEmptyNodeSelectorVolume             bool          // default true
	AllowEmptyDiskSelectorVolume             bool          // default true
	ReplicaReplenishmentWaitInterval         time.Duration // default 600 s

	// The CPU settings stay as written: [PlanCPU] validates them and reports
	// every violation instead of stopping at the first.
	GuaranteedEngineManagerCPU   string // percent, default "12"
	GuaranteedReplicaManagerCPU  string // percent, default "12"
	GuaranteedInstanceManagerCPU string // percent (or {"v1":..,"v2":..}); "" when absent
	GuaranteedEngineCPU          string // deprecated, cores; "" when absent or migrated

	// SplitCPUSettingsGiven records that guaranteed-engine-manager-cpu or
	// guaranteed-replica-manager-cpu was present, which selects the
	// Longhorn 1.1-1.4 form even when the merged setting is also present.
	SplitCPUSettingsGiven bool
}

// DefaultSettings returns Longhorn's defaults.
func DefaultSettings() Settings {
	return Settings{
		ReplicaSoftAntiAffinity:                  false,
		ReplicaZoneSoftAntiAffinity:              true,
		ReplicaDiskSoftAntiAffinity:              true,
		StorageMinimalAvailablePercentage:        25,
		StorageOverProvisioningPercentage:        100,
		ReplicaAutoBalance:                       AutoBalanceDisabled,
		ReplicaAutoBalanceDiskPressurePercentage: 90,
		AllowEmptyNodeSelectorVolume:             true,
		AllowEmptyDiskSelectorVolume:             true,
		ReplicaReplenishmentWaitInterval:         600 * time.Second,
		GuaranteedEngineManagerCPU:               "12",
		GuaranteedReplicaManagerCPU:              "12",
	}
}

// Set parses one setting's value. It returns an error naming the setting
// when the value is malformed or out of range; unknown names are ignored.
func (s *Settings) Set(name, value string) error {
	v := strings.TrimSpace(value)
	var err error
	switch name {
	case SettingReplicaSoftAntiAffinity:
		s.ReplicaSoftAntiAffinity, err = parseBoolSetting(name, v)
	case SettingReplicaZoneSoftAntiAffinity:
		s.ReplicaZoneSoftAntiAffinity, err = parseBoolSetting(name, v)
	case SettingReplicaDiskSoftAntiAffinity:
		s.ReplicaDiskSoftAntiAffinity, err = parseBoolSetting(name, v)
	case SettingAllowEmptyNodeSelectorVolume:
		s.AllowEmptyNodeSelectorVolume, err = parseBoolSetting(name, v)
	case SettingAllowEmptyDiskSelectorVolume:
		s.AllowEmptyDiskSelectorVolume, err = parseBoolSetting(name, v)
	case SettingStorageMinimalAvailablePercentage:
		s.StorageMinimalAvailablePercentage, err = parseIntSetting(name, v, 0, 100)
	case SettingStorageOverProvisioningPercentage:
		s.StorageOverProvisioningPercentage, err = parseIntSetting(name, v, 0, 1<<40)
	case SettingReplicaAutoBalanceDiskPressure:
		s.ReplicaAutoBalanceDiskPressurePercentage, err = parseIntSetting(name, v, 0, 100)
	case SettingReplicaReplenishmentWaitInterval:
		var secs int64
		secs, err = parseIntSetting(name, v, 0, 1<<32)
		s.ReplicaReplenishmentWaitInterval = time.Duration(secs) * time.Second
	case SettingReplicaAutoBalance:
		switch v {
		case AutoBalanceDisabled, AutoBalanceLeastEffort, AutoBalanceBestEffort:
			s.ReplicaAutoBalance = v
		default:
			err = errorf("setting %q: value: %q is not disabled, least-effort or best-effort", name, v)
		}
	case SettingGuaranteedEngineManagerCPU:
		s.GuaranteedEngineManagerCPU, s.SplitCPUSettingsGiven = v, true
	case SettingGuaranteedReplicaManagerCPU:
		s.GuaranteedReplicaManagerCPU, s.SplitCPUSettingsGiven = v, true
	case SettingGuaranteedInstanceManagerCPU:
		s.GuaranteedInstanceManagerCPU = v
	case SettingGuaranteedEngineCPU:
		s.GuaranteedEngineCPU = v
	}
	return err
}

// Validate checks the ranges of the parsed scheduling settings (not the
// CPU ones, which [PlanCPU] reports).
func (s *Settings) Validate() error {
	switch {
	case s.StorageMinimalAvailablePercentage < 0 || s.StorageMinimalAvailablePercentage > 100:
		return errorf("setting %q: value: %d is not in 0..100", SettingStorageMinimalAvailablePercentage, s.StorageMinimalAvailablePercentage)
	case s.StorageOverProvisioningPercentage < 0 || s.StorageOverProvisioningPercentage > 1<<40:
		return errorf("setting %q: value: %d is out of range", SettingStorageOverProvisioningPercentage, s.StorageOverProvisioningPercentage)
	case s.ReplicaAutoBalanceDiskPressurePercentage < 0 || s.ReplicaAutoBalanceDiskPressurePercentage > 100:
		return errorf("setting %q: value: %d is not in 0..100", SettingReplicaAutoBalanceDiskPressure, s.ReplicaAutoBalanceDiskPressurePercentage)
	case s.ReplicaReplenishmentWaitInterval < 0:
		return errorf("setting %q: value: negative interval", SettingReplicaReplenishmentWaitInterval)
	}
	switch s.ReplicaAutoBalance {
	case AutoBalanceDisabled, AutoBalanceLeastEffort, AutoBalanceBestEffort:
	default:
		return errorf("setting %q: value: %q is not disabled, least-effort or best-effort", SettingReplicaAutoBalance, s.ReplicaAutoBalance)
	}
	return nil
}

func parseBoolSetting(name, v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errorf("setting %q: value: %q is not true or false", name, v)
	}
	return b, nil
}

func parseIntSetting(name, v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, errorf("setting %q: value: %q is not an integer", name, v)
	}
	if n < lo || n > hi {
		return 0, errorf("setting %q: value: %d is not in %d..%d", name, n, lo, hi)
	}
	return n, nil
}

// effective resolves a volume override ("ignored"/"" → the setting).
func effectiveSoft(override string, global bool) bool {
	switch override {
	case "enabled":
		return true
	case "disabled":
		return false
	}
	return global
}

// effectiveAutoBalance resolves a volume's replicaAutoBalance.
func effectiveAutoBalance(v *Volume, s *Settings) string {
	switch v.ReplicaAutoBalance {
	case AutoBalanceDisabled, AutoBalanceLeastEffort, AutoBalanceBestEffort:
		return v.ReplicaAutoBalance
	}
	return s.ReplicaAutoBalance
}
