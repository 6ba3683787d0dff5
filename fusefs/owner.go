package fusefs

import (
	"fmt"
	"os"
)

// Owner is who owns every file and directory of a mount and which permission bits they
// show. The mount uses default_permissions, so the kernel enforces these bits against the
// caller's uid and groups (for users other than the mounting one that takes AllowOther).
// The names and meanings are rclone's --uid, --gid and --umask.
type Owner struct {
	// UID and GID own every file and directory.
	UID, GID uint32
	// Umask clears permission bits from the read-only modes: a file shows 0444 &^ Umask,
	// a directory 0555 &^ Umask. The mount refuses writes whatever the bits, so there are
	// no write bits to clear (rclone starts from 0666 and 0777). 0o022 and 0 both give
	// 0444 and 0555; 0o027 hides the mount from users outside GID, 0o077 from all but
	// UID.
	Umask uint32
}

// DefaultOwner is the mounting user and group, files 0444 and directories 0555 (umask
// 022): every user the mount lets in (see MountOptions.AllowOther) may read.
func DefaultOwner() Owner {
	return Owner{UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), Umask: 0o022}
}

// Validate reports an owner that cannot work.
func (o Owner) Validate() error {
	if o.Umask&^0o777 != 0 {
		return fmt.Errorf("umask %#o has bits beyond 0777", o.Umask)
	}
	return nil
}

// Modes every node shows before the umask: read-only, directories searchable.
const (
	fileMode = 0o444
	dirMode  = 0o555
)

func (o Owner) fileMode() uint32 { return fileMode &^ o.Umask }
func (o Owner) dirMode() uint32  { return dirMode &^ o.Umask }
